// Dropout's CUDA kernel beside cuda::Dropout: the boolean mask output.
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t DropoutMaskOutput(size_t n, const float* scales, int64_t* mask, cudaStream_t stream) {
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t i) {
    mask[i] = scales == nullptr || scales[i] != 0.0f ? 1 : 0;
  });
}

}  // namespace easyscale::graph::cuda_ops
