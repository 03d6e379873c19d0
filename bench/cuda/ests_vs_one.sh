#!/usr/bin/env bash
# Issue 19: N = 8 ESTs on one GPU worker against one EST of the same global
# batch, for ResNet-50 (3x224x224, global batch 64) and the BERT-base-like
# encoder (global batch 32), samples/s from step_bench's JSON lines.
#   bench/cuda/ests_vs_one.sh DIR   where DIR holds step_bench (a CUDA build)
#   and its shared libraries in DIR/lib; python3 with torch and onnx exports.
set -euo pipefail
dir=$(cd "${1:?usage: ests_vs_one.sh DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export_model() { "$py" "$root/deploy/examples/models/export.py" "$@" --seed 1 >/dev/null 2>&1; }
export_model --model resnet50 --in-channels 3 --image-size 224 --out "$tmp/resnet50.onnx"
export_model --model encoder --width 768 --heads 12 --layers 12 --seq-len 128 --vocab 30522 \
  --out "$tmp/encoder.onnx"
run() { "$dir/step_bench" --backend cuda "$@" | tee -a "$tmp/rows"; }
run --model-file "$tmp/resnet50.onnx" --ests 1 --batch 64 --steps 5 --warmup 2
run --model-file "$tmp/resnet50.onnx" --ests 8 --batch 8 --steps 5 --warmup 2
tokens=(--model-file "$tmp/encoder.onnx" --dataset tokens --vocab 30522 --steps 4 --warmup 2)
run "${tokens[@]}" --ests 1 --batch 32
run "${tokens[@]}" --ests 8 --batch 4
"$py" - "$tmp/rows" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for one, eight in zip(rows[0::2], rows[1::2]):
    name = "resnet50" if "resnet50" in one["model"] else "encoder"
    print(f"{name} global batch {one['global_batch']}: 8 ESTs {eight['samples_per_s']:.1f} samples/s, "
          f"1 EST {one['samples_per_s']:.1f}, ratio {eight['samples_per_s'] / one['samples_per_s']:.2f} (goal 0.95)")
PY
