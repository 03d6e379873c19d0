// The strided-view ops' CUDA kernels (layout_util.h's StridedViewOp:
// Transpose, Slice), which only move elements. The view's dimensions are
// merged first where the strided side runs contiguously across them. Where
// its last dimension is contiguous there too (the encoder's attention
// transposes keep the head's 64 elements together), a warp moves whole rows,
// its lanes along the row, and finds each row's offset by stepping the
// previous row's multi-index: one thread an element paid a division per
// dimension for every element (an H100 spent 6 ms a step of the encoder in
// these copies, about seven times what their bytes take). Where instead the
// view is whole matrices transposed (the keys' transpose), cuda::TransposeBatch
// moves them in 32x32 tiles through shared memory, both sides in whole runs.
// Other views keep one thread an element.
#include <climits>
#include <optional>
#include <type_traits>

#include "cuda_kernels.h"
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {
namespace {

constexpr int kWarp = 32;
constexpr int kRowThreads = 256;
constexpr int64_t kRowsPerWarp = 4;

// `view` without its size-1 dimensions, and with each pair of neighbours
// merged where the strided side steps from one into the next as one
// dimension would (steps[d - 1] == out[d] * steps[d]): the same elements at
// the same offsets, in the same order, over fewer dimensions.
BroadcastDims Merged(const BroadcastDims& view) {
  BroadcastDims m;
  for (int d = 0; d < view.rank; ++d) {
    if (view.out[d] == 1) continue;
    if (m.rank > 0 && m.steps[0][m.rank - 1] == view.out[d] * view.steps[0][d]) {
      m.out[m.rank - 1] *= view.out[d];
      m.steps[0][m.rank - 1] = view.steps[0][d];
      continue;
    }
    m.out[m.rank] = view.out[d];
    m.steps[0][m.rank] = view.steps[0][d];
    ++m.rank;
  }
  return m;
}

template <typename T>
cudaError_t CopyElements(const BroadcastDims& view, size_t n, int64_t offset, bool scatter,
                         const T* src, T* dst, cudaStream_t stream) {
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t e) {
    int64_t rest = static_cast<int64_t>(e), at = offset;
    for (int d = view.rank; d-- > 0;) {
      at += rest % view.out[d] * view.steps[0][d];
      rest /= view.out[d];
    }
    if (scatter) {
      dst[at] = src[e];
    } else {
      dst[e] = src[at];
    }
  });
}

// Rows of view.out[rank - 1] elements, contiguous on both sides: warp w moves
// rows kRowsPerWarp * w onwards. The dimensions before the last index the row
// (unrolled over kMaxRank so that the multi-index stays in registers). A lane
// loads its elements of all the warp's rows, kColumnSteps warp-widths of
// each, before it stores any: with one row's load waiting on the previous
// row's store, an H100 moved the encoder's head split and merge at about 1.5
// TB/s.
constexpr int kColumnSteps = 2;
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    CopyRowsKernel(BroadcastDims view, int64_t rows, int64_t offset, bool scatter,
                   const T* __restrict__ src, T* __restrict__ dst) {
  const int outer = view.rank - 1;
  const int64_t length = view.out[outer];
  const int64_t first =
      (static_cast<int64_t>(blockIdx.x) * kRowThreads + threadIdx.x) / kWarp * kRowsPerWarp;
  if (first >= rows) return;
  const int count = static_cast<int>(min(rows - first, kRowsPerWarp));
  int64_t index[kMaxRank - 1];
  int64_t rest = first, at = offset;
#pragma unroll
  for (int d = kMaxRank - 2; d >= 0; --d) {
    if (d < outer) {
      index[d] = rest % view.out[d];
      rest /= view.out[d];
      at += index[d] * view.steps[0][d];
    }
  }
  int64_t strided[kRowsPerWarp];  // each row's offset on the strided side
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    strided[r] = at;
#pragma unroll
    for (int d = kMaxRank - 2; d >= 0; --d) {  // the next row's multi-index
      if (d < outer) {
        at += view.steps[0][d];
        if (++index[d] < view.out[d]) break;
        at -= view.out[d] * view.steps[0][d];
        index[d] = 0;
      }
    }
  }
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  for (int64_t c0 = lane; c0 < length; c0 += kColumnSteps * kWarp) {
    // Element (r, h): row first + r, column c0 + h * kWarp.
    const auto inside = [&](int r, int h) { return r < count && c0 + h * kWarp < length; };
    const auto dense = [&](int r, int h) { return (first + r) * length + c0 + h * kWarp; };
    const auto sparse = [&](int r, int h) { return strided[r] + c0 + h * kWarp; };
    T v[kRowsPerWarp][kColumnSteps];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
      for (int h = 0; h < kColumnSteps; ++h) {
        if (inside(r, h)) v[r][h] = src[scatter ? dense(r, h) : sparse(r, h)];
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
      for (int h = 0; h < kColumnSteps; ++h) {
        if (inside(r, h)) dst[scatter ? sparse(r, h) : dense(r, h)] = v[r][h];
      }
    }
  }
}

// Where the merged view is whole P x Q matrices of a row-major [batch][Q][P]
// source at offset 0 (steps P * Q, 1, P: the keys' transpose), its batch, P
// and Q, for cuda::TransposeBatch's 32x32 tiles; else nullopt.
struct TransposedMatrices {
  int batch, p, q;
};
std::optional<TransposedMatrices> AsTransposedMatrices(const BroadcastDims& view, int64_t offset) {
  const int last = view.rank - 1;
  if (offset != 0 || last < 1 || last > 2) return std::nullopt;
  const int64_t p = view.out[last - 1], q = view.out[last];
  const int64_t batch = last == 2 ? view.out[0] : 1;
  if (view.steps[0][last - 1] != 1 || view.steps[0][last] != p ||
      (last == 2 && view.steps[0][0] != p * q))
    return std::nullopt;
  // Tiles for matrices at least half a tile each way; the kernel's grid limits.
  if (p < 16 || q < 16 || p > INT_MAX || q > INT_MAX || batch > 65535) return std::nullopt;
  return TransposedMatrices{static_cast<int>(batch), static_cast<int>(p), static_cast<int>(q)};
}

template <typename T>
cudaError_t Copy(const BroadcastDims& full, int64_t offset, bool scatter, const T* src, T* dst,
                 cudaStream_t stream) {
  size_t n = 1;
  for (int d = 0; d < full.rank; ++d) n *= static_cast<size_t>(full.out[d]);
  if (n == 0) return cudaSuccess;
  const BroadcastDims view = Merged(full);
  if constexpr (std::is_same_v<T, float>) {
    if (const auto t = AsTransposedMatrices(view, offset)) {
      // Gather: each [q][p] source matrix into [p][q]; scatter: back.
      return scatter ? cuda::TransposeBatch(t->batch, t->p, t->q, src, dst, stream)
                     : cuda::TransposeBatch(t->batch, t->q, t->p, src, dst, stream);
    }
  }
  const int last = view.rank - 1;
  if (last < 0 || view.steps[0][last] != 1 || view.out[last] < kWarp) {
    return CopyElements(view, n, offset, scatter, src, dst, stream);
  }
  const int64_t rows = static_cast<int64_t>(n) / view.out[view.rank - 1];
  const int64_t warps = (rows + kRowsPerWarp - 1) / kRowsPerWarp;
  const int64_t blocks = (warps * kWarp + kRowThreads - 1) / kRowThreads;
  if (blocks > INT_MAX) return CopyElements(view, n, offset, scatter, src, dst, stream);
  CopyRowsKernel<<<static_cast<unsigned>(blocks), kRowThreads, 0, stream>>>(view, rows, offset,
                                                                            scatter, src, dst);
  return cudaGetLastError();
}

}  // namespace

cudaError_t StridedCopy(const BroadcastDims& view, int64_t offset, size_t element_bytes,
                        bool scatter, const void* src, void* dst, cudaStream_t stream) {
  if (element_bytes == sizeof(int64_t)) {
    return Copy(view, offset, scatter, static_cast<const int64_t*>(src), static_cast<int64_t*>(dst),
                stream);
  }
  return Copy(view, offset, scatter, static_cast<const float*>(src), static_cast<float*>(dst),
              stream);
}

}  // namespace easyscale::graph::cuda_ops
