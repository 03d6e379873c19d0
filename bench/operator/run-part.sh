#!/usr/bin/env bash
# Operator latencies in the simulated cluster (called by bench/run.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"${BUILD_DIR:-$root/build}/bin/operator_latency_bench" --rounds 5
