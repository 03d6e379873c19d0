// Dropout's CUDA kernel beside cuda::Dropout: the boolean mask output.
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t DropoutMaskOutput(size_t n, const uint8_t* kept, int64_t* mask, cudaStream_t stream) {
  return cuda::LaunchForEach(
      n, stream, [=] __device__(size_t i) { mask[i] = kept == nullptr || kept[i] != 0 ? 1 : 0; });
}

}  // namespace easyscale::graph::cuda_ops
