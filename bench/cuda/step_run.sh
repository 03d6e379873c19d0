#!/usr/bin/env bash
# The training-step comparisons of issue 8 on a GPU machine, in one run:
#   1. one step of our worker (step_bench --backend cuda, one EST of batch B)
#      against PyTorch's step on the same GPU (torch_step_bench.py: the same
#      model, batch, fp32, SGD), eager and CUDA-graphed;
#   2. N=8 ESTs of batch B/8 on one GPU worker, side by side on the backend's
#      lanes and one after another (--lanes 1), against one EST of batch B
#      (the same global batch), samples/s.
# Prints JSON lines, then one line per ratio.
#   bench/cuda/step_run.sh DIR   where DIR holds step_bench (a CUDA build) and
#   its shared libraries in DIR/lib
set -euo pipefail
dir=$(cd "${1:?usage: step_run.sh DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=$(mktemp)
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
for model in cnn mlp; do
  for b in 16 64 128; do
    "$dir/step_bench" --backend cuda --model "$model" --batch "$b" --steps 200 | tee -a "$out"
  done
  for b in 64 128; do
    "$dir/step_bench" --backend cuda --model "$model" --ests 8 --batch $((b / 8)) --steps 100 | tee -a "$out"
    "$dir/step_bench" --backend cuda --model "$model" --ests 8 --batch $((b / 8)) --lanes 1 --steps 100 | tee -a "$out"
  done
  "$dir/step_bench" --backend cpu --model "$model" --batch 64 --steps 30 | tee -a "$out"
done
PYTHONUNBUFFERED=1 python3 "$here/torch_step_bench.py" --batches 16,64,128 --steps 100 --json | tee -a "$out"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ours = {(r["model"], r["ests"], r["batch_per_est"], r["backend"], r["lanes"]): r
        for r in rows if r.get("bench") == "step"}
torch = {(r["model"], r["batch"]): r for r in rows if r.get("bench") == "torch_step"}
for (model, b), t in sorted(torch.items()):
    o = ours.get((model, 1, b, "cuda", 0))
    if o:
        print(f"{model} batch {b}: ours {o['median_ms']:.3f} ms, torch eager {t['eager_ms']:.3f} ms "
              f"(torch/ours {t['eager_ms'] / o['median_ms']:.2f}), torch graph {t['graph_ms']:.3f} ms "
              f"(torch/ours {t['graph_ms'] / o['median_ms']:.2f})")
for (model, n, b, backend, lanes), o in sorted(ours.items()):
    one = ours.get((model, 1, n * b, backend, 0))
    if n == 8 and one:
        how = "one after another" if lanes == 1 else "side by side"
        print(f"{model} global batch {n * b}: 8 ESTs x {b} {how} {o['samples_per_s']:.0f} samples/s, "
              f"1 EST x {n * b} {one['samples_per_s']:.0f} samples/s, ratio "
              f"{o['samples_per_s'] / one['samples_per_s']:.3f}")
PY
