#!/usr/bin/env bash
# Scale-out, preemption and crash-recovery latencies in the isolated test
# cluster (called by bench/run.sh; needs root).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"${BUILD_DIR:-$root/build}/bin/operator_latency_bench" --rounds 5 --model mlp
"${BUILD_DIR:-$root/build}/bin/operator_latency_bench" --rounds 5 --model cnn
