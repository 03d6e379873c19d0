// File: worker/src/cuda/launch.cuh
//
// The launchers for the element-parallel kernels: grid-stride loops over n
// independent outputs, each computed by `f` alone, so the launch shape never
// changes a value (it only decides which thread computes it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace easyscale::cuda {

inline constexpr int kBlockThreads = 256;

// Whether p may be read or written as float4s (16-byte vectors).
inline bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The blocks of a grid-stride launch that wants `wanted`: at most 65535 * 16
// (the loops take the rest).
inline unsigned GridStrideBlocks(size_t wanted) {
  constexpr size_t kMaxBlocks = 65535 * 16;
  return static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
}

template <typename F>
__global__ void ForEachIndex(size_t n, F f) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    f(i);
}

template <typename F>
cudaError_t LaunchForEach(size_t n, cudaStream_t stream, F f) {
  if (n == 0) return cudaSuccess;
  const unsigned blocks = GridStrideBlocks((n + kBlockThreads - 1) / kBlockThreads);
  ForEachIndex<<<blocks, kBlockThreads, 0, stream>>>(n, f);
  return cudaGetLastError();
}

// f(i, c, p, row) for every element i of a [B, C, P] tensor with its channel
// c, position p and row b * C + c (the per-channel and per-row element passes,
// the per-plane kernels). A warp takes
// 32 * kInChannelsPerLane consecutive elements, a lane every 32nd, so its
// accesses stay contiguous, and a lane follows its channel and position by
// counting: a 64-bit division per element cost more than the memory traffic.
inline constexpr unsigned kInChannelsPerLane = 8;

template <typename F>
__global__ void ForEachInChannelsKernel(size_t n, unsigned C, unsigned P, F f) {
  constexpr size_t kSpan = 32 * kInChannelsPerLane;
  const unsigned lane = threadIdx.x % 32;
  const size_t warps = static_cast<size_t>(gridDim.x) * blockDim.x / 32;
  for (size_t base = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * kSpan;
       base < n; base += warps * kSpan) {
    size_t i = base + lane;
    if (i >= n) continue;
    size_t row = i / P;
    unsigned p = static_cast<unsigned>(i - row * P), c = static_cast<unsigned>(row % C);
    for (unsigned k = 0; k < kInChannelsPerLane && i < n; ++k, i += 32) {
      f(i, c, p, row);
      p += 32;
      if (p < P) continue;
      if (P >= 32) {  // at most one row boundary in 32 positions
        p -= P;
        c = c + 1 == C ? 0 : c + 1;
        ++row;
      } else {
        row = (i + 32) / P;
        p = static_cast<unsigned>(i + 32 - row * P), c = static_cast<unsigned>(row % C);
      }
    }
  }
}

template <typename F>
cudaError_t LaunchForEachInChannels(size_t B, size_t C, size_t P, cudaStream_t stream, F f) {
  const size_t n = B * C * P;
  if (n == 0) return cudaSuccess;
  if (C > 0xffffffffu || P > 0x7fffffffu) return cudaErrorInvalidValue;
  constexpr size_t kWarpsPerBlock = kBlockThreads / 32, kSpan = 32 * kInChannelsPerLane;
  const unsigned blocks =
      GridStrideBlocks(((n + kSpan - 1) / kSpan + kWarpsPerBlock - 1) / kWarpsPerBlock);
  ForEachInChannelsKernel<<<blocks, kBlockThreads, 0, stream>>>(n, static_cast<unsigned>(C),
                                                                static_cast<unsigned>(P), f);
  return cudaGetLastError();
}

}  // namespace easyscale::cuda
