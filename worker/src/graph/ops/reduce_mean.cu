// ReduceMean's CUDA kernels: reduce_mean.cc's order, one thread per output
// element (a gather over its inputs in ascending index) and per input
// element (backward).
#include "graph/ops/broadcast.cuh"
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t ReduceMeanForward(const BroadcastDims& bc, size_t y_size, float count, const float* x,
                              float* y, cudaStream_t stream) {
  return cuda::LaunchForEach(y_size, stream, [=] __device__(size_t e) {
    float sum = 0.0f;
    ForEachReader(bc, 1, static_cast<int64_t>(e),
                  [&](int64_t o, int64_t, int64_t) { sum += x[o]; });
    y[e] = sum / count;
  });
}

cudaError_t ReduceMeanBackward(const BroadcastDims& bc, size_t n, float count, const float* dy,
                               float* dx, cudaStream_t stream) {
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t o) {
    int64_t ix, iy;
    OperandIndices(bc, static_cast<int64_t>(o), &ix, &iy);
    dx[o] = dy[iy] / count;
  });
}

}  // namespace easyscale::graph::cuda_ops
