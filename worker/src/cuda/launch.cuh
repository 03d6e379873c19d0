// File: worker/src/cuda/launch.cuh
//
// One launcher for the element-parallel kernels: a grid-stride loop over n
// independent outputs, each computed by `f(i)` alone, so the launch shape never
// changes a value (it only decides which thread computes it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace easyscale::cuda {

inline constexpr int kBlockThreads = 256;

template <typename F>
__global__ void ForEachIndex(size_t n, F f) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    f(i);
}

template <typename F>
cudaError_t LaunchForEach(size_t n, cudaStream_t stream, F f) {
  if (n == 0) return cudaSuccess;
  const size_t wanted = (n + kBlockThreads - 1) / kBlockThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 65535 * 16 ? wanted : 65535 * 16);
  ForEachIndex<<<blocks, kBlockThreads, 0, stream>>>(n, f);
  return cudaGetLastError();
}

}  // namespace easyscale::cuda
