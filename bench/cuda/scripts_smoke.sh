#!/usr/bin/env bash
# The scripts a lent GPU runs (compare_builds.sh with PROFILE=1,
# models_run.sh, ests_vs_one.sh), each in its SMALL mode on DIR's build (tiny
# models, the CPU backend): each must print its summary for every model, so
# that a script broken by a change is found here, not on the GPU's clock.
#   bench/cuda/scripts_smoke.sh DIR   (DIR holds step_bench; PYTHON: a python3
#                                      with torch, torchvision and onnx)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: scripts_smoke.sh DIR}
export SMALL=1
failed=0
# expect SCRIPT COUNT PATTERN OUTPUT: OUTPUT has COUNT lines matching PATTERN.
expect() {
  local n
  n=$(grep -c -e "$3" <<<"$4")
  if [ "$n" -ne "$2" ]; then
    echo "$1: $n lines match '$3', want $2; its output's end:"
    tail -20 <<<"$4"
    failed=1
  else
    echo "$1: $n lines match '$3'"
  fi
}
out=$(PROFILE=1 ROUNDS=1 bash "$here/compare_builds.sh" "$dir" "$dir" 2>&1)
expect compare_builds.sh 4 '^SUMMARY ' "$out"
expect compare_builds.sh 8 '^ops [a-z0-9]* build [01]: ' "$out"
out=$(bash "$here/models_run.sh" "$dir" 2>&1)
expect models_run.sh 4 '^SUMMARY .* ours [0-9.]* ms' "$out"
out=$(bash "$here/ests_vs_one.sh" "$dir" 2>&1)
expect ests_vs_one.sh 2 ': 8 ESTs [0-9.]* samples/s, 1 EST [0-9.]*, ratio ' "$out"
exit $failed
