// Gather's CUDA kernels: one thread per output element (forward); backward,
// gather.cc's scatter-add gathered per table row, its contributions added
// from 0 in ascending index position, by blocks that each own a range of
// rows and find their positions in one pass over the indices.
#include <algorithm>

#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {
namespace {

// Index position p's row along the axis, or -1 when out of range.
__device__ inline int64_t Row(const int64_t* indices, size_t p, size_t axis_dim) {
  const int64_t dim = static_cast<int64_t>(axis_dim);
  const int64_t k = indices[p];
  if (k < -dim || k >= dim) return -1;
  return k < 0 ? k + dim : k;
}

}  // namespace

cudaError_t GatherForward(size_t outer, size_t axis_dim, size_t positions, size_t inner,
                          const float* data, const int64_t* indices, float* out,
                          cudaStream_t stream) {
  return cuda::LaunchForEach(outer * positions * inner, stream, [=] __device__(size_t e) {
    const size_t i = e % inner, p = e / inner % positions, o = e / inner / positions;
    const int64_t row = Row(indices, p, axis_dim);
    out[e] = row < 0 ? 0.0f : data[(o * axis_dim + static_cast<size_t>(row)) * inner + i];
  });
}

namespace {

constexpr int kGatherThreads = 256;
constexpr int kGatherRows = 32;  // table rows per block

// Block (o, rows r0..r0+kGatherRows-1): each chunk of kGatherThreads index
// positions is compacted, ascending, to the positions that hit the block's
// rows (a ballot per warp, the warps' counts added in warp order), and then
// thread t adds those positions' dy into elements i = t, t + kGatherThreads,
// ... of their rows. Each dx element has one owning thread, which adds its
// terms in ascending position order from 0: the CPU's chain.
__global__ void __launch_bounds__(kGatherThreads)
    GatherBackwardKernel(size_t outer, size_t axis_dim, size_t positions, size_t inner,
                         const float* __restrict__ dy, const int64_t* __restrict__ indices,
                         float* __restrict__ dx) {
  constexpr int kWarps = kGatherThreads / 32;
  __shared__ int warp_base[kWarps];
  __shared__ int total;
  __shared__ unsigned hit_pos[kGatherThreads];
  __shared__ int hit_row[kGatherThreads];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const size_t groups = (axis_dim + kGatherRows - 1) / kGatherRows;
  for (size_t block = blockIdx.x; block < outer * groups; block += gridDim.x) {
    const size_t o = block / groups, r0 = block % groups * kGatherRows;
    const int rows = static_cast<int>(axis_dim - r0 < kGatherRows ? axis_dim - r0 : kGatherRows);
    float* const dx_rows = dx + (o * axis_dim + r0) * inner;
    for (size_t e = tid; e < rows * inner; e += kGatherThreads) dx_rows[e] = 0.0f;
    for (size_t c0 = 0; c0 < positions; c0 += kGatherThreads) {
      const size_t p = c0 + tid;
      const int64_t row = p < positions ? Row(indices, p, axis_dim) : -1;
      const bool hit = row >= static_cast<int64_t>(r0) && row < static_cast<int64_t>(r0) + rows;
      const unsigned mask = __ballot_sync(0xffffffffu, hit);
      if (lane == 0) warp_base[warp] = __popc(mask);
      __syncthreads();
      if (tid == 0) {
        int sum = 0;
        for (int w = 0; w < kWarps; ++w) {
          const int count = warp_base[w];
          warp_base[w] = sum;
          sum += count;
        }
        total = sum;
      }
      __syncthreads();
      if (hit) {
        const int slot = warp_base[warp] + __popc(mask & ((1u << lane) - 1u));
        hit_pos[slot] = static_cast<unsigned>(tid);
        hit_row[slot] = static_cast<int>(row - static_cast<int64_t>(r0));
      }
      __syncthreads();
      for (int h = 0; h < total; ++h) {
        const float* src = dy + (o * positions + c0 + hit_pos[h]) * inner;
        float* dst = dx_rows + static_cast<size_t>(hit_row[h]) * inner;
        for (size_t i = tid; i < inner; i += kGatherThreads) dst[i] = dst[i] + src[i];
      }
      __syncthreads();  // the lists are rewritten by the next chunk
    }
  }
}

}  // namespace

cudaError_t GatherBackward(size_t outer, size_t axis_dim, size_t positions, size_t inner,
                           const float* dy, const int64_t* indices, float* dx,
                           cudaStream_t stream) {
  const size_t blocks = outer * ((axis_dim + kGatherRows - 1) / kGatherRows);
  if (blocks == 0 || inner == 0) return cudaSuccess;
  GatherBackwardKernel<<<static_cast<unsigned>(std::min<size_t>(blocks, 1u << 20)), kGatherThreads,
                         0, stream>>>(outer, axis_dim, positions, inner, dy, indices, dx);
  return cudaGetLastError();
}

}  // namespace easyscale::graph::cuda_ops
