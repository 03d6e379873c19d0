#!/usr/bin/env bash
# Where a training step's GPU time goes, kernel by kernel, for ours and for
# PyTorch on the same GPU (issue 19): our step_bench under Nsight Compute (one
# line per kernel launch: duration, registers, grid, occupancy, FMA-pipe
# use; the implicit GEMMs' launches also with their warp stall reasons) and
# PyTorch's step under torch.profiler (torch_kernel_profile.py, deterministic
# mode). Writes, per model, OUTDIR/NAME-ours.csv, NAME-gemm.csv and
# NAME-torch.jsonl; bench/cuda/kernel_profile_summary.py reads them.
#   bench/cuda/kernel_profile.sh DIR OUTDIR   DIR as models_run.sh takes it
# MODELS picks models as in models_run.sh (default: resnet50 resnet18).
# ncu's clock control is off (the lent machines' advice); ncu serialises
# kernels, so durations are each kernel's alone.
set -uo pipefail
dir=$(cd "${1:?usage: kernel_profile.sh DIR OUTDIR}" && pwd)
out=${2:?usage: kernel_profile.sh DIR OUTDIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${PYTHON:-python3}
ncu=${NCU:-ncu}
export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
MODELS=${MODELS:-resnet50 resnet18}
# shellcheck source=bench/cuda/model_specs.sh
. "$here/model_specs.sh"
metrics=gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
while IFS='|' read -r name knobs batch; do
  model_wanted "$name" || continue
  onnx=$tmp/$name.onnx
  export_model "$knobs" "$onnx" || { tail -3 "$onnx.log"; continue; }
  vocab=$(vocab_of "$knobs")
  # Two passes: the first records the CUDA graph, the second replays it
  # (ncu profiles a graph's kernels one by one).
  ours=("$dir/step_bench" --backend cuda --model-file "$onnx" --batch "$batch" --vocab "$vocab"
    --steps 1 --warmup 1)
  "$ncu" --clock-control none --csv --page raw --metrics "$metrics" "${ours[@]}" \
    >"$out/$name-ours.csv" 2>"$tmp/ncu.err" || tail -3 "$tmp/ncu.err"
  "$ncu" --clock-control none --csv --page raw --kernel-name regex:TiledGemm --launch-count 240 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    "${ours[@]}" >"$out/$name-gemm.csv" 2>"$tmp/ncu.err" || tail -3 "$tmp/ncu.err"
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 env -u CUBLAS_WORKSPACE_CONFIG "$py" "$here/torch_kernel_profile.py" $knobs \
    --seed 1 --batch "$batch" --mode deterministic --steps 3 --warmup 3 >"$out/$name-torch.jsonl"
done <<<"$specs"
ls -la "$out"
