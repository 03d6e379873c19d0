// Gather's CUDA kernels: one thread per output element (forward) and per
// data element (backward: gather.cc's scatter-add gathered per table row,
// its contributions added from 0 in ascending index position).
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

cudaError_t GatherBackward(size_t outer, size_t axis_dim, size_t positions, size_t inner,
                           const float* dy, const int64_t* indices, float* dx,
                           cudaStream_t stream) {
  return cuda::LaunchForEach(outer * axis_dim * inner, stream, [=] __device__(size_t e) {
    const size_t i = e % inner, row = e / inner % axis_dim, o = e / inner / axis_dim;
    float sum = 0.0f;
    for (size_t p = 0; p < positions; ++p) {
      if (Row(indices, p, axis_dim) == static_cast<int64_t>(row)) {
        sum += dy[(o * positions + p) * inner + i];
      }
    }
    dx[e] = sum;
  });
}

}  // namespace easyscale::graph::cuda_ops
