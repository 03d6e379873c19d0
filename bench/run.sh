#!/usr/bin/env bash
# Runs the CPU benchmarks and prints their JSON lines; figures go to BENCHMARKS.md.
#   bash bench/run.sh            (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/build/bin"
echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
"$bin/est_bench" --model cnn --ests 8 --batch 16
"$bin/est_bench" --model mlp --ests 8 --batch 16
# The graph runtime's step of each example ONNX model against PyTorch's, one thread.
ROUNDS=5 bash "$root/bench/worker/graph_vs_torch.sh" 32
# The image-folder pipeline against a ResNet-18 training step.
bash "$root/bench/worker/image_pipeline.sh"
# Scale events of the standard job, from "stopping" to the first resumed step,
# against the median step time of the same run.
"$bin/easyscale-worker" local --ests 8 --steps 120 --schedule 0:8,20:3,45:5,70:1,90:8 | grep -E '"event":"(scale|summary)"'
for extra in "$root"/bench/*/run-part.sh; do
  [ -f "$extra" ] && bash "$extra"
done
