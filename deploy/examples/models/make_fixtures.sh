#!/usr/bin/env bash
# Test fixtures for the worker's ONNX loader and ops: each example model at its
# narrow CI width, exported without dropout (MODEL.onnx), PyTorch's reference
# training step on one batch (MODEL.json), and a numpy check that the graph
# computes what PyTorch computed. About 22 MB in all; a minute on one core.
#   deploy/examples/models/make_fixtures.sh OUT_DIR [--opset N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: make_fixtures.sh OUT_DIR [--opset N]}
shift
py=${PYTHON:-/usr/bin/python3}
mkdir -p "$out"
for spec in "cnn 4" "resnet18 8" "mobilenetv2 0.25" "encoder 32"; do
  read -r model width <<<"$spec"
  knobs=(--model "$model" --width "$width" --seed 1 --seq-len 16 --vocab 100)
  # The exporter's warnings go to a log, shown when it fails.
  if ! "$py" "$here/export.py" "${knobs[@]}" --dropout 0 --out "$out/$model.onnx" "$@" \
      2>"$out/$model.export.log"; then
    cat "$out/$model.export.log" >&2
    exit 1
  fi
  "$py" "$here/torch_reference.py" "${knobs[@]}" --batch 4 --batch-seed 7 --lr 0.05 \
    --momentum 0.9 --weight-decay 1e-4 --onnx "$out/$model.onnx" --out "$out/$model.json"
  "$py" "$here/onnx_check.py" --onnx "$out/$model.onnx" --reference "$out/$model.json"
done
