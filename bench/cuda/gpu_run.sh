#!/usr/bin/env bash
# Builds and runs the CUDA kernel checks and the GEMM benchmark on a GPU machine
# that has only the CUDA toolkit (no CMake dependencies of the project: no
# gloo, absl or GoogleTest). The flags are the ones worker/CMakeLists.txt gives
# the same files: -fmad=false, IEEE division and sqrt, no flush-to-zero on the
# device; -ffp-contract=off on the host.
# Usage: bench/cuda/gpu_run.sh [build-dir]   (from the repository root)
set -euo pipefail
BUILD=${1:-build-gpu}
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA/bin/nvcc}
CXX=${CXX:-g++}
ARCH=${CUDA_ARCH:-90}
mkdir -p "$BUILD"
INC=(-Iworker/include -Iworker/src/cuda -I"$CUDA/include")
NVFLAGS=(-std=c++17 -O3 -arch=sm_$ARCH -fmad=false -prec-div=true -prec-sqrt=true -ftz=false
  --extended-lambda -Xptxas -v -Xcompiler -ffp-contract=off "${INC[@]}")
CXXFLAGS=(-std=c++20 -O3 -ffp-contract=off -fno-fast-math -fno-trapping-math -mfma -mavx2 "${INC[@]}")

pids=()
for f in gemm layout_kernels reduction_kernels step_kernels; do
  "$NVCC" "${NVFLAGS[@]}" -c worker/src/cuda/$f.cu -o "$BUILD/$f.o" 2>"$BUILD/$f.ptxas" & pids+=($!)
done
"$CXX" "${CXXFLAGS[@]}" -c worker/src/cpu_kernels.cc -o "$BUILD/cpu_kernels.o" & pids+=($!)
for f in kernel_checks gpu_kernel_check_main; do
  "$CXX" "${CXXFLAGS[@]}" -c worker/src/cuda/$f.cc -o "$BUILD/$f.o" & pids+=($!)
done
"$CXX" "${CXXFLAGS[@]}" -c bench/cuda/gemm_bench.cc -o "$BUILD/gemm_bench.o" & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
grep -hE "registers|spill" "$BUILD"/gemm.ptxas || true

KERNELS=("$BUILD/gemm.o" "$BUILD/layout_kernels.o" "$BUILD/reduction_kernels.o" "$BUILD/step_kernels.o")
"$NVCC" -arch=sm_$ARCH "$BUILD/gpu_kernel_check_main.o" "$BUILD/kernel_checks.o" \
  "$BUILD/cpu_kernels.o" "${KERNELS[@]}" -o "$BUILD/gpu_kernel_check"
"$NVCC" -arch=sm_$ARCH "$BUILD/gemm_bench.o" "${KERNELS[@]}" -lcublas -o "$BUILD/gemm_bench"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv
check_rc=0
"$BUILD/gpu_kernel_check" || check_rc=$?
"$BUILD/gemm_bench"
exit $check_rc
