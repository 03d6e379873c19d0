#!/usr/bin/env bash
# Collects a CUDA build's binaries (stripped) and the shared libraries they
# link into DIR, and the digits file into DIR/../data, for a GPU machine that
# has the CUDA driver and NCCL but none of the project's other libraries:
# DIR is what step_run.sh, models_run.sh and ests_vs_one.sh take. NCCL is
# left out (large; the GPU machine's own is used: add its folder to
# LD_LIBRARY_PATH there).
#   bench/cuda/collect.sh DIR   (after scripts/build.sh on a machine with nvcc)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:?usage: collect.sh DIR}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for b in easyscale-worker easyscale-test-worker step_bench cuda_kernels_test gpu_kernel_check; do
  bash "$root/deploy/docker/collect-runtime-libs.sh" "$stage" "$root/build/bin/$b" >/dev/null
done
mkdir -p "$dest/lib" "$dest/../data"
cp "$stage/bin/"* "$dest/"
cp "$stage/lib/"* "$dest/lib/"
rm -f "$dest/lib/libnccl.so"*
strip "$dest/"* "$dest/lib/"* 2>/dev/null || true
cp "$root/build/data/mnist-digits.esd" "$dest/../data/"
du -sh "$dest"
