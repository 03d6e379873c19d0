#!/usr/bin/env bash
# Every example model's digest through the real CLI on every backend and
# several schedules, on a GPU machine: each model's lines must all show one
# digest. The models are small exports (deploy/examples/models/export.py: the
# CNN, ResNet-18 of width 8 and MobileNetV2 of width 0.25 on the digits, the
# encoder of width 32 on token sequences); 4 ESTs, 30 steps of micro-batch 8.
# "cuda 0:1" keeps the whole update on the device (one worker: parameters,
# optimizer state and sums never leave it); the multi-worker schedules update
# on the host after the collective; mixed runs CPU and GPU workers together.
# OPTIMIZER (default sgd) picks the optimizer of every run.
#   bench/cuda/model_digests.sh DIR   where DIR holds easyscale-worker (a CUDA
#   build) and its shared libraries in DIR/lib (collect.sh), and DIR/../data
#   the digits file; PYTHON (default python3) has torch and onnx
set -uo pipefail
dir=$(cd "${1:?usage: model_digests.sh DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
optimizer=${OPTIMIZER:-sgd}
export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
digits=$dir/../data/mnist-digits.esd
status=0
# name | export.py knobs | data flags
specs="cnn|--model cnn|--digits-file $digits
resnet18|--model resnet18 --width 8|--digits-file $digits
mobilenetv2|--model mobilenetv2 --width 0.25|--digits-file $digits
encoder|--model encoder --width 32|--dataset tokens"
while IFS='|' read -r name knobs data; do
  # shellcheck disable=SC2086  # the knobs are words
  "$py" "$root/deploy/examples/models/export.py" $knobs --seed 1 --out "$tmp/$name.onnx" >/dev/null ||
    { echo "$name: export failed"; status=1; continue; }
  digests=()
  for run in "cpu 0:4" "cpu 0:4,10:2,25:3" "cuda 0:1" "cuda 0:4,10:2,25:3" "mixed 0:4,10:2,25:3"; do
    set -- $run
    # shellcheck disable=SC2086
    line=$("$dir/easyscale-worker" local --ests 4 --steps 30 --batch-per-est 8 \
      --optimizer "$optimizer" --model-file "$tmp/$name.onnx" $data --backend "$1" \
      --schedule "$2" 2>&1 | grep -E '^digest:' | awk '{print $2}')
    echo "$name optimizer=$optimizer backend=$1 schedule=$2 digest=${line:-none}"
    digests+=("${line:-none}")
  done
  if [ "$(printf '%s\n' "${digests[@]}" | sort -u | wc -l)" != 1 ] || [ "${digests[0]}" = none ]; then
    echo "$name: DIGESTS DIFFER"
    status=1
  else
    echo "$name: one digest on every backend and schedule"
  fi
done <<<"$specs"
exit $status
