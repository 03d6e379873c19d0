#!/usr/bin/env bash
# Device-plugin RPC latencies (called by bench/run.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"${BUILD_DIR:-$root/build}/bin/device_plugin_bench" --iterations 2000
