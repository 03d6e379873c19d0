#!/usr/bin/env bash
# The standard job (CNN, MNIST digits, N=8, 120 steps) through the real CLI with
# every backend; on a GPU machine every line must show the same digest. Each
# line also says how many workers summed through NCCL (one rank per GPU: only
# where every worker has a GPU of its own) instead of Gloo.
#   bench/cuda/cli_digests.sh DIR   where DIR holds easyscale-worker (a CUDA
#   build) and its shared libraries in DIR/lib (collect.sh), and DIR/../data
#   the digits file
set -u
dir=$(cd "${1:?usage: cli_digests.sh DIR}" && pwd)
export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# The last line's CUDA worker faults (an illegal address: its context is lost)
# in step 50 and must recover from the job's checkpoint to the same digest.
for spec in "cpu 0:1" "cuda 0:1" "cuda 0:8,20:3,45:5,70:1,90:8" "mixed 0:2" \
            "mixed 0:8,20:3,45:5,70:1,90:8" "cuda 0:2 --fault-worker-at 50"; do
  set -- $spec
  worker=easyscale-worker
  [ $# -gt 2 ] && worker=easyscale-test-worker
  out=$("$dir/$worker" local --ests 8 --steps 120 --backend "$1" --schedule "$2" "${@:3}" \
        --digits-file "$dir/../data/mnist-digits.esd" --log-level info 2>&1)
  nccl=$(echo "$out" | grep -c '"msg":"sums through NCCL"')
  echo "backend=$1 schedule=$2 ${*:3} nccl_generations=$nccl $(echo "$out" | grep -E '^digest:|^test accuracy:|error' | tr '\n' ' ')"
done
