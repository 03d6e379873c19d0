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
// Softmax+Dropout's staged rows are dropped as they are stored (each lane
// draws two Philox blocks of the warp's 256 elements and the lanes exchange
// their flags by shuffles): the probabilities are not read again, and the
// Dropout's launch goes; other rows run cuda::Dropout after the rows' kernel.
// Its gradient runs cuda::DropoutBackward into dx and the rows' gradient in
// place (the rows' kernel reading the flags and the dropped output's gradient
// itself ran 1.77 ms a step against 0.82 + the dropout's, run 27).
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
// consecutive elements at a time. Storing with kDrops, each element also goes
// dropped to dropout.dropped with its flag, `first` being global[0]'s index in
// the tensor (a multiple of 4: a Philox block's first element).
template <bool kToTile, bool kDrops = false, typename Global>
__device__ void MoveRows(Global* global, float* tile, int rows, int n, int ld,
                         const SoftmaxDropout& dropout = {}, size_t first = 0) {
  constexpr int kChunk = kWarpRows * kLoadsInFlight;  // a warp's elements a round
  static_assert(kChunk == 2 * 4 * kWarpRows, "a lane draws two Philox blocks a round");
  const int count = rows * n, lane = static_cast<int>(threadIdx.x);
  const float drop_scale = kDrops ? 1.0f / (1.0f - dropout.draw.p) : 0.0f;
  int r = lane / n, c = lane % n;
  // Every lane runs every round (the shuffles below need the whole warp).
  for (int e0 = 0; e0 < count; e0 += kChunk) {
    const int e = e0 + lane;
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
    // Element e + 32 i is in the round's block 8 i + lane / 4 (of 64), which
    // lane (8 i + lane / 4) % 32 draws: lane l draws blocks l and 32 + l.
    unsigned drawn[2] = {};
    if constexpr (kDrops) {
      const size_t block0 = (first + static_cast<size_t>(e0)) / 4;
      drawn[0] = dropout.draw.KeptBits(block0 + lane);
      drawn[1] = dropout.draw.KeptBits(block0 + kWarpRows + lane);
    }
#pragma unroll
    for (int i = 0; i < kLoadsInFlight; ++i) {
      bool keeps = false;
      if constexpr (kDrops) {
        const unsigned bits = __shfl_sync(0xffffffffu, drawn[i / 4], (i % 4) * 8 + lane / 4);
        keeps = (bits >> (lane % 4)) & 1u;
      }
      if (e + i * kWarpRows >= count) continue;
      if constexpr (kToTile) {
        tile[at[i]] = v[i];
      } else {
        global[e + i * kWarpRows] = v[i];
      }
      if constexpr (kDrops) {
        const size_t in_tensor = first + static_cast<size_t>(e + i * kWarpRows);
        dropout.dropped[in_tensor] = v[i] * formulas::DropoutScale(keeps, drop_scale);
        dropout.kept[in_tensor] = keeps;
      }
    }
  }
}

// One warp a block; block b takes groups b, b + gridDim.x, ... of 32 rows.
template <bool kDrops>
__global__ void SoftmaxStagedKernel(size_t rows, int n, bool log, SoftmaxScale scale,
                                    const float* x, float* y, SoftmaxDropout dropout) {
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
    MoveRows<false, kDrops>(y + r0 * n, tile, count, n, ld, dropout, r0 * n);
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

// In place too (dy == dx): a row's dy are all read before its dx are written.
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
                           const float* x, float* y, const SoftmaxDropout* dropout,
                           cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  if (Staged(n, inner)) {
    const auto kernel = dropout != nullptr ? SoftmaxStagedKernel<true> : SoftmaxStagedKernel<false>;
    kernel<<<StagedBlocks(outer), kWarpRows, StagedBytes(n), stream>>>(
        outer, static_cast<int>(n), log, scale, x, y,
        dropout != nullptr ? *dropout : SoftmaxDropout{});
    return cudaGetLastError();
  }
  const float* in = x;
  if (scale.given) {
    if (const cudaError_t err = ScaleInto(outer * n * inner, scale, x, y, stream)) return err;
    in = y;  // SoftmaxRow runs in place too
  }
  if (const cudaError_t err =
          cuda::LaunchForEach(outer * inner, stream,
                              [=] __device__(size_t r) {
                                const size_t base = r / inner * n * inner + r % inner;
                                SoftmaxRow(in + base, y + base, static_cast<int64_t>(n),
                                           static_cast<int64_t>(inner), log);
                              });
      err != cudaSuccess || dropout == nullptr) {
    return err;
  }
  return cuda::Dropout(outer * n * inner, dropout->draw, y, nullptr, dropout->dropped,
                       dropout->kept, stream);
}

cudaError_t SoftmaxBackward(size_t outer, size_t n, size_t inner, bool log, SoftmaxScale scale,
                            const float* y, const float* dy, const SoftmaxDropout* dropout,
                            float* dx, cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  if (dropout != nullptr) {  // the Dropout's gradient into dx, the rows' then in place
    if (const cudaError_t err = cuda::DropoutBackward(outer * n * inner, dropout->draw.p,
                                                      dropout->kept, dy, dx, stream)) {
      return err;
    }
    dy = dx;
  }
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
