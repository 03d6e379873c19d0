#!/usr/bin/env bash
# The second command of the README: installs what is missing, builds, and runs
# the whole test suite (unit, multi-process integration, end-to-end) with ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
cd "$root"
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900 "$@"
