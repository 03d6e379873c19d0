#!/usr/bin/env bash
# Issue 19: N = 8 ESTs on one GPU worker against one EST of the same global
# batch, for ResNet-50 (3x224x224, global batch 64) and the BERT-base-like
# encoder (global batch 32), samples/s from step_bench's JSON lines (12 steps
# after 3 warm-up ones, the median's ratio and the 10th percentiles').
#   bench/cuda/ests_vs_one.sh DIR   where DIR holds step_bench (a CUDA build)
#   and its shared libraries in DIR/lib; python3 with torch and onnx exports.
#   LANES="1 2 4" also runs the eight ESTs on that many lanes (step_bench
#   --lanes; the backend's 8 otherwise): how far their passes overlap.
#   SMALL=1 runs tiny models on the CPU backend (no GPU): checks the script.
set -euo pipefail
dir=$(cd "${1:?usage: ests_vs_one.sh DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export_model() { "$py" "$root/deploy/examples/models/export.py" "$@" --seed 1 >/dev/null 2>&1; }
backend=cuda image=224 encoder=(--width 768 --heads 12 --layers 12 --seq-len 128) vocab=30522
if [ "${SMALL:-0}" = 1 ]; then
  backend=cpu image=32 encoder=(--width 32 --heads 2 --layers 1 --seq-len 16) vocab=64
fi
export_model --model resnet50 --in-channels 3 --image-size "$image" --out "$tmp/resnet50.onnx"
export_model --model encoder "${encoder[@]}" --vocab "$vocab" --out "$tmp/encoder.onnx"
run() { "$dir/step_bench" --backend "$backend" "$@" | tee -a "$tmp/rows"; }
# compare MODEL_FLAGS... GLOBAL_BATCH: one EST of the whole batch, then eight.
compare() {
  local batch=${*: -1} flags=("${@:1:$#-1}")
  run "${flags[@]}" --ests 1 --batch "$batch"
  run "${flags[@]}" --ests 8 --batch $((batch / 8))
  for lanes in ${LANES:-}; do run "${flags[@]}" --ests 8 --batch $((batch / 8)) --lanes "$lanes"; done
}
compare --model-file "$tmp/resnet50.onnx" --steps 12 --warmup 3 64
compare --model-file "$tmp/encoder.onnx" --dataset tokens --vocab "$vocab" --steps 12 --warmup 3 32
"$py" - "$tmp/rows" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
one = None
for row in rows:
    name = "resnet50" if "resnet50" in row["model"] else "encoder"
    if row["ests"] == 1:
        one = row
        continue
    lanes = f" on {row['lanes']} lanes" if row["lanes"] else ""
    # The steps' 10th percentiles too: a median of a dozen steps still moved
    # 6% between runs of one build (run 18).
    print(f"{name} global batch {one['global_batch']}: 8 ESTs{lanes} {row['samples_per_s']:.1f} samples/s, "
          f"1 EST {one['samples_per_s']:.1f}, ratio {row['samples_per_s'] / one['samples_per_s']:.2f} "
          f"(by p10 {one['p10_ms'] / row['p10_ms']:.2f}; goal 0.95)")
PY
