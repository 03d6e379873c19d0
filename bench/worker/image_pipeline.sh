#!/usr/bin/env bash
# The image-folder pipeline against the training step, in one run on this
# CPU: image_pipeline_bench (CIFAR-sized JPEGs, 3x32x32 out, per core and
# with the decoding pool), then one training step of the example ResNet-18
# (full width 64, batch 128, the graph runtime, one EST: step_bench) and the
# ratio of the pipeline's per-core rate to the step's rate. Not part of ctest.
#   bash bench/worker/image_pipeline.sh        (after building image_pipeline_bench, step_bench)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%F)"
pipeline=$("$bin/image_pipeline_bench" --threads "$(nproc)" --epochs 3)
echo "$pipeline"
/usr/bin/python3 "$root/deploy/examples/models/export.py" --model resnet18 --seed 1 \
  --out "$tmp/resnet18.onnx" >/dev/null
step=$("$bin/step_bench" --model-file "$tmp/resnet18.onnx" --batch 128 --steps 2 --warmup 1)
echo "$step"
/usr/bin/python3 - "$pipeline" "$step" <<'PY'
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines()]
rate = {l["measure"].split(" ")[0]: l["samples_per_s"] for l in lines}
step = json.loads(sys.argv[2])
print(json.dumps({"pipeline_per_core_samples_per_s": round(rate["per_core"]),
                  "pipeline_pool_samples_per_s": round(rate["pool"]),
                  "resnet18_step_samples_per_s": round(step["samples_per_s"], 1),
                  "ratio_per_core_over_step": round(rate["per_core"] / step["samples_per_s"], 1),
                  "h200_needs_samples_per_s": {"eager_8.97ms": round(128 / 8.97e-3),
                                                "graphed_5.18ms": round(128 / 5.18e-3)}}))
PY
