// Softmax's and LogSoftmax's CUDA kernels: each row runs row_formulas.h's
// formulas in softmax.cc's order; only which thread loads an element changes.
// Rows of contiguous elements (the last axis: the encoder's attention, 128 a
// row) go a warp's 32 rows at a time, one row a lane, with coalesced loads:
// - the forward stages the warp's whole rows in shared memory and each lane
//   runs SoftmaxRow on its own (3.28 -> 0.98 ms a step of the encoder on an
//   H100, run 20);
// - the gradient's sum needs two arrays, too many to stage whole (six warps an
//   SM ran it slower, 2.60 -> 2.85 ms): the warp computes a 32-column chunk
//   of its rows' terms into a 32x33 tile, each lane folds its row's chunk in
//   ascending order, and the outputs are written a row at a time, a lane a
//   column (2.62 -> 1.66 ms, run 21; folding the forward so read x three
//   times and ran slower, 0.98 -> 1.51).
// Loads go 8 at a time into registers before their stores, so that a warp
// has 8 in flight. Other rows (`inner` apart) keep one thread a row.
#include "graph/ops/cuda_ops.h"
#include "graph/ops/row_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {
namespace {

constexpr int kWarpRows = 32;      // one a lane
constexpr int kLoadsInFlight = 8;  // a lane's loads issued before their stores
// At most 48 KiB of staged rows a warp (the launch's default shared memory).
constexpr int64_t kMaxStagedFloats = 48 * 1024 / sizeof(float);

// The staged row stride: odd, so the lanes' reads of their rows' element j
// fall in 32 different banks.
__host__ __device__ int64_t StagedLd(int64_t n) { return n % 2 == 1 ? n : n + 1; }

bool Staged(size_t n, size_t inner) {
  return inner == 1 && n > 0 && kWarpRows * StagedLd(static_cast<int64_t>(n)) <= kMaxStagedFloats;
}

// Moves `rows` rows of n contiguous floats between global memory (from
// `global`, row after row) and the staged tile (rows ld apart), a warp's
// consecutive elements at a time.
template <bool kToTile, typename Global>
__device__ void MoveRows(Global* global, float* tile, int rows, int n, int ld) {
  const int count = rows * n;
  int e = static_cast<int>(threadIdx.x);
  int r = e / n, c = e % n;
  for (; e < count; e += kWarpRows * kLoadsInFlight) {
    int at[kLoadsInFlight];  // the elements' places in the tile
    float v[kLoadsInFlight];
#pragma unroll
    for (int i = 0; i < kLoadsInFlight; ++i) {
      at[i] = r * ld + c;
      if (e + i * kWarpRows < count) v[i] = kToTile ? global[e + i * kWarpRows] : tile[at[i]];
      c += kWarpRows;
      while (c >= n) {
        c -= n;
        ++r;
      }
    }
#pragma unroll
    for (int i = 0; i < kLoadsInFlight; ++i) {
      if (e + i * kWarpRows >= count) break;
      if constexpr (kToTile) {
        tile[at[i]] = v[i];
      } else {
        global[e + i * kWarpRows] = v[i];
      }
    }
  }
}

// One warp a block; block b takes groups b, b + gridDim.x, ... of 32 rows.
__global__ void SoftmaxStagedKernel(size_t rows, int n, bool log, SoftmaxScale scale,
                                    const float* x, float* y) {
  extern __shared__ float tile[];  // [32][ld]
  const int ld = static_cast<int>(StagedLd(n)), lane = static_cast<int>(threadIdx.x);
  for (size_t r0 = static_cast<size_t>(blockIdx.x) * kWarpRows; r0 < rows;
       r0 += static_cast<size_t>(gridDim.x) * kWarpRows) {
    const int count = static_cast<int>(min(static_cast<size_t>(kWarpRows), rows - r0));
    MoveRows<true>(x + r0 * n, tile, count, n, ld);
    __syncwarp();
    // In place: SoftmaxRow reads each x[j] before it writes y[j].
    if (lane < count) {
      float* const row = tile + lane * ld;
      if (scale.given) {
        for (int j = 0; j < n; ++j) row[j] = scale.Input(row[j]);
      }
      SoftmaxRow(row, row, n, 1, log);
    }
    __syncwarp();
    MoveRows<false>(y + r0 * n, tile, count, n, ld);
    __syncwarp();  // the next group's loads overwrite the tile
  }
}

unsigned StagedBlocks(size_t rows) {
  return cuda::GridStrideBlocks((rows + kWarpRows - 1) / kWarpRows);
}

size_t StagedBytes(size_t n) {
  return static_cast<size_t>(kWarpRows * StagedLd(static_cast<int64_t>(n))) * sizeof(float);
}

// The gradient's kernel: blocks of kGradientWarps warps, each warp a group
// of 32 rows at a time (see the file's comment).
constexpr int kGradientWarps = 4;

__global__ void __launch_bounds__(kWarpRows* kGradientWarps)
    SoftmaxGradientRowsKernel(int64_t rows, int n, bool log, SoftmaxScale scale, const float* y,
                              const float* dy, float* dx) {
  __shared__ float tiles[kGradientWarps][kWarpRows][kWarpRows + 1];
  const int lane = static_cast<int>(threadIdx.x) % kWarpRows;
  float(*const tile)[kWarpRows + 1] = tiles[threadIdx.x / kWarpRows];
  const int64_t groups = (rows + kWarpRows - 1) / kWarpRows;
  for (int64_t group = static_cast<int64_t>(blockIdx.x) * kGradientWarps + threadIdx.x / kWarpRows;
       group < groups; group += static_cast<int64_t>(gridDim.x) * kGradientWarps) {
    const int64_t first = group * kWarpRows * n;
    const int count =
        static_cast<int>(min(static_cast<int64_t>(kWarpRows), rows - group * kWarpRows));
    // Lane l's row sum t, 32 columns at a time.
    float t = 0.0f;
    for (int c0 = 0; c0 < n; c0 += kWarpRows) {
      const int width = min(kWarpRows, n - c0);
      for (int r0 = 0; r0 < count; r0 += kLoadsInFlight) {
        float term[kLoadsInFlight];
#pragma unroll
        for (int i = 0; i < kLoadsInFlight; ++i) {
          const int64_t e = first + static_cast<int64_t>(r0 + i) * n + c0 + lane;
          term[i] = r0 + i < count && lane < width ? SoftmaxGradTerm(y[e], dy[e], log) : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < kLoadsInFlight; ++i) tile[r0 + i][lane] = term[i];
      }
      __syncwarp();
      if (lane < count) {
        for (int c = 0; c < width; ++c) t += tile[lane][c];
      }
      __syncwarp();  // the next chunk overwrites the tile
    }
    // The outputs, 8 rows at a time, each row's t from its lane.
    for (int r0 = 0; r0 < count; r0 += kLoadsInFlight) {
      float row_t[kLoadsInFlight];
#pragma unroll
      for (int i = 0; i < kLoadsInFlight; ++i) row_t[i] = __shfl_sync(0xffffffffu, t, r0 + i);
      for (int c = lane; c < n; c += kWarpRows) {
        float out[kLoadsInFlight];
#pragma unroll
        for (int i = 0; i < kLoadsInFlight; ++i) {
          const int64_t e = first + static_cast<int64_t>(r0 + i) * n + c;
          out[i] = r0 + i < count ? SoftmaxGradOutput(y[e], dy[e], row_t[i], log) : 0.0f;
          out[i] = scale.Gradient(out[i]);
        }
#pragma unroll
        for (int i = 0; i < kLoadsInFlight; ++i) {
          if (r0 + i < count) dx[first + static_cast<int64_t>(r0 + i) * n + c] = out[i];
        }
      }
    }
  }
}

// y = x scaled, each element (the rows' formulas then run in place on y).
cudaError_t ScaleInto(size_t count, SoftmaxScale scale, const float* x, float* y,
                      cudaStream_t stream) {
  return cuda::LaunchForEach(count, stream, [=] __device__(size_t e) { y[e] = scale.Input(x[e]); });
}

}  // namespace

cudaError_t SoftmaxForward(size_t outer, size_t n, size_t inner, bool log, SoftmaxScale scale,
                           const float* x, float* y, cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  if (Staged(n, inner)) {
    SoftmaxStagedKernel<<<StagedBlocks(outer), kWarpRows, StagedBytes(n), stream>>>(
        outer, static_cast<int>(n), log, scale, x, y);
    return cudaGetLastError();
  }
  if (scale.given) {
    if (const cudaError_t err = ScaleInto(outer * n * inner, scale, x, y, stream)) return err;
    x = y;  // SoftmaxRow runs in place too
  }
  return cuda::LaunchForEach(outer * inner, stream, [=] __device__(size_t r) {
    const size_t base = r / inner * n * inner + r % inner;
    SoftmaxRow(x + base, y + base, static_cast<int64_t>(n), static_cast<int64_t>(inner), log);
  });
}

cudaError_t SoftmaxBackward(size_t outer, size_t n, size_t inner, bool log, SoftmaxScale scale,
                            const float* y, const float* dy, float* dx, cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  if (inner == 1 && n <= 0x7fffffff) {
    const size_t groups = (outer + kWarpRows - 1) / kWarpRows;
    SoftmaxGradientRowsKernel<<<cuda::GridStrideBlocks((groups + kGradientWarps - 1) /
                                                       kGradientWarps),
                                kWarpRows * kGradientWarps, 0, stream>>>(
        static_cast<int64_t>(outer), static_cast<int>(n), log, scale, y, dy, dx);
    return cudaGetLastError();
  }
  if (const cudaError_t err = cuda::LaunchForEach(
          outer * inner, stream,
          [=] __device__(size_t r) {
            const size_t base = r / inner * n * inner + r % inner;
            SoftmaxRowGradient(y + base, dy + base, dx + base, static_cast<int64_t>(n),
                               static_cast<int64_t>(inner), log);
          });
      err != cudaSuccess || !scale.given) {
    return err;
  }
  return cuda::LaunchForEach(outer * n * inner, stream,
                             [=] __device__(size_t e) { dx[e] = scale.Gradient(dx[e]); });
}

}  // namespace easyscale::graph::cuda_ops
