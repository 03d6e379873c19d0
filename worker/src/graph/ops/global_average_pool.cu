// GlobalAveragePool's CUDA kernels: global_average_pool.cc's order, one
// thread per plane (forward) and per input element (backward).
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t GlobalAveragePoolForward(size_t planes, size_t positions, const float* x, float* y,
                                     cudaStream_t stream) {
  const float count = static_cast<float>(positions);
  return cuda::LaunchForEach(planes, stream, [=] __device__(size_t pl) {
    float sum = 0.0f;
    for (size_t p = 0; p < positions; ++p) sum += x[pl * positions + p];
    y[pl] = sum / count;
  });
}

cudaError_t GlobalAveragePoolBackward(size_t planes, size_t positions, const float* dy, float* dx,
                                      cudaStream_t stream) {
  const float count = static_cast<float>(positions);
  return cuda::LaunchForEach(planes * positions, stream,
                             [=] __device__(size_t e) { dx[e] = dy[e / positions] / count; });
}

}  // namespace easyscale::graph::cuda_ops
