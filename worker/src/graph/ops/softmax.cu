// Softmax's and LogSoftmax's CUDA kernels: each row runs row_formulas.h's row,
// as softmax.cc does. The forward's rows of contiguous elements (the last
// axis: the encoder's attention, 128 a row) are staged through shared memory
// a warp's 32 rows at a time, so that the warp's loads and stores are
// coalesced while each lane still runs its own row's formula: on an H100 the
// encoder's softmax forward went from 3.28 to 0.99 ms a step (one thread per
// row straight from global memory read a row 512 bytes from its neighbour's).
// The gradient keeps one thread per row in place: staged, its two arrays'
// tiles left room for six warps an SM and it ran slower (2.60 -> 2.85 ms).
// Other rows (`inner` apart) keep one thread per row in place.
#include "graph/ops/cuda_ops.h"
#include "graph/ops/row_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {
namespace {

constexpr int kWarpRows = 32;  // one a lane
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
  for (; e < count; e += kWarpRows) {
    if constexpr (kToTile) {
      tile[r * ld + c] = global[e];
    } else {
      global[e] = tile[r * ld + c];
    }
    c += kWarpRows;
    while (c >= n) {
      c -= n;
      ++r;
    }
  }
}

// One warp a block; block b takes groups b, b + gridDim.x, ... of 32 rows.
__global__ void SoftmaxStagedKernel(size_t rows, int n, bool log, const float* x, float* y) {
  extern __shared__ float tile[];  // [32][ld]
  const int ld = static_cast<int>(StagedLd(n)), lane = static_cast<int>(threadIdx.x);
  for (size_t r0 = static_cast<size_t>(blockIdx.x) * kWarpRows; r0 < rows;
       r0 += static_cast<size_t>(gridDim.x) * kWarpRows) {
    const int count = static_cast<int>(min(static_cast<size_t>(kWarpRows), rows - r0));
    MoveRows<true>(x + r0 * n, tile, count, n, ld);
    __syncwarp();
    // In place: SoftmaxRow reads each x[j] before it writes y[j].
    if (lane < count) SoftmaxRow(tile + lane * ld, tile + lane * ld, n, 1, log);
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

}  // namespace

cudaError_t SoftmaxForward(size_t outer, size_t n, size_t inner, bool log, const float* x, float* y,
                           cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  if (Staged(n, inner)) {
    SoftmaxStagedKernel<<<StagedBlocks(outer), kWarpRows, StagedBytes(n), stream>>>(
        outer, static_cast<int>(n), log, x, y);
    return cudaGetLastError();
  }
  return cuda::LaunchForEach(outer * inner, stream, [=] __device__(size_t r) {
    const size_t base = r / inner * n * inner + r % inner;
    SoftmaxRow(x + base, y + base, static_cast<int64_t>(n), static_cast<int64_t>(inner), log);
  });
}

cudaError_t SoftmaxBackward(size_t outer, size_t n, size_t inner, bool log, const float* y,
                            const float* dy, float* dx, cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  return cuda::LaunchForEach(outer * inner, stream, [=] __device__(size_t r) {
    const size_t base = r / inner * n * inner + r % inner;
    SoftmaxRowGradient(y + base, dy + base, dx + base, static_cast<int64_t>(n),
                       static_cast<int64_t>(inner), log);
  });
}

}  // namespace easyscale::graph::cuda_ops
