// Clip's CUDA kernels: clip.cc's selects, one thread per element.
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t ClipForward(size_t n, float lo, float hi, const float* x, float* y,
                        cudaStream_t stream) {
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t i) {
    const float v = x[i] < lo ? lo : x[i];
    y[i] = v > hi ? hi : v;
  });
}

cudaError_t ClipBackward(size_t n, float lo, float hi, const float* x, const float* dy, float* dx,
                         cudaStream_t stream) {
  return cuda::LaunchForEach(
      n, stream, [=] __device__(size_t i) { dx[i] = x[i] >= lo && x[i] <= hi ? dy[i] : 0.0f; });
}

}  // namespace easyscale::graph::cuda_ops
