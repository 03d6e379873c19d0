#!/usr/bin/env bash
# Several CUDA builds checked and timed against each other in one run on a GPU
# machine (a lent GPU comes rarely and briefly: one call should hold the whole
# comparison). For each build DIR (collect.sh's layout: its binaries, their
# libraries in DIR/lib): cuda_kernels_test and gpu_kernel_check where DIR has
# them (a build that fails a bit check is not timed), then for each of issue
# 19's models (model_specs.sh) one training step of every build in turn
# (step_bench, one EST, 8 timed steps after 3), ROUNDS times, so that the
# GPU's drift falls on all builds alike. Ends with a line per model: each
# build's median over its rounds and its time over the first build's.
#   bench/cuda/compare_builds.sh DIR...   (ROUNDS=2; MODELS as models_run.sh)
#   PROFILE=1 also splits each model's step by op for every build (step_bench
#   --profile-ops: each op type's ms a step, forward and backward; the
#   PROFILE_TOP (12) largest), after the timed rounds; PROFILE=nodes splits it
#   by node instead (--profile-nodes), a layer's number in a node name read as
#   N so that a model's repeated layers add up (/blocks/blocks.N/fc1/MatMul)
#   SMALL=1 bench/cuda/compare_builds.sh DIR...   tiny models on the CPU, no
#                                         bit checks: checks the script
# PYTHON (default python3) runs export.py.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: compare_builds.sh DIR..." >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${PYTHON:-python3}
rounds=${ROUNDS:-2}
# shellcheck source=bench/cuda/model_specs.sh
. "$here/model_specs.sh"
dirs=()
for d in "$@"; do dirs+=("$(cd "$d" && pwd)") || exit 2; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
steps=(--steps 8 --warmup 3)
[ "$backend" = cpu ] && steps=(--steps 2 --warmup 1)
[ "$backend" = cuda ] && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

# in_build I COMMAND...: runs build I's binary COMMAND with its libraries.
in_build() {
  local d=${dirs[$1]} binary=$2
  shift 2
  LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$d/$binary" "$@"
}

timed=()
for i in "${!dirs[@]}"; do
  echo "build $i: ${dirs[$i]}"
  ok=1
  for check in cuda_kernels_test gpu_kernel_check; do
    if [ "$backend" != cuda ] || [ ! -x "${dirs[$i]}/$check" ]; then continue; fi
    if in_build "$i" "$check" >"$tmp/check.log" 2>&1; then
      echo "build $i: $check passed ($(grep -E '^\[  PASSED|checks,' "$tmp/check.log" | tail -1))"
    else
      echo "build $i: $check FAILED, not timed:"
      grep -E 'FAILED|^DIFFER' "$tmp/check.log" | head -10
      ok=0
    fi
  done
  [ "$ok" = 1 ] && timed+=("$i")
done

out=$tmp/steps.txt
while IFS='|' read -r name knobs batch; do
  model_wanted "$name" || continue
  onnx=$tmp/$name.onnx
  if ! export_model "$knobs" "$onnx"; then
    echo "$name: export.py failed"
    tail -3 "$onnx.log"
    continue
  fi
  for round in $(seq "$rounds"); do
    for i in "${timed[@]}"; do
      ms=$(in_build "$i" step_bench --backend "$backend" --model-file "$onnx" --batch "$batch" \
        --vocab "$(vocab_of "$knobs")" "${steps[@]}" 2>"$tmp/step.err" |
        "$py" -c 'import json, sys; print(json.load(sys.stdin)["median_ms"])' 2>/dev/null)
      [ -n "$ms" ] || { ms=failed; tail -1 "$tmp/step.err"; }
      echo "step $name build $i round $round median_ms $ms" | tee -a "$out"
    done
  done
  case "${PROFILE:-0}" in
    1) profile=--profile-ops ;;
    nodes) profile=--profile-nodes ;;
    *) continue ;;
  esac
  for i in "${timed[@]}"; do
    in_build "$i" step_bench --backend "$backend" --model-file "$onnx" --batch "$batch" \
      --vocab "$(vocab_of "$knobs")" --steps 3 --warmup 1 "$profile" 2>"$tmp/step.err" |
      "$py" -c '
import json, re, sys
name, build, top = sys.argv[1:]
for line in sys.stdin:
    d = json.loads(line)
    if d.get("bench") == "op_times":
        ms = {}
        for o in d["ops"]:
            key = re.sub(r"(?<=[./])[0-9]+(?=/)", "N", o["op"])
            ms[key] = ms.get(key, 0.0) + o["ms_per_step"]
        largest = sorted(ms.items(), key=lambda kv: -kv[1])[:int(top)]
        print(f"ops {name} build {build}: " + ", ".join("%s %.2f" % kv for kv in largest))' \
      "$name" "$i" "${PROFILE_TOP:-12}" || tail -1 "$tmp/step.err"
  done
done <<<"$specs"

"$py" - "$out" <<'PY'
import statistics, sys
runs = {}  # model -> build -> [ms]
for line in open(sys.argv[1]):
    _, model, _, build, _, _, _, ms = line.split()
    if ms != "failed":
        runs.setdefault(model, {}).setdefault(int(build), []).append(float(ms))
for model, builds in runs.items():
    first = statistics.median(builds[min(builds)])
    parts = [f"build {b} {statistics.median(v):.2f} ms ({statistics.median(v) / first:.3f})"
             for b, v in sorted(builds.items())]
    print(f"SUMMARY {model}: " + ", ".join(parts))
PY
