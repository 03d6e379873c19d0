// The float-to-int64 conversion the graph model's int64 input takes on a
// device (token ids arrive as floats, exact below 2^24), as the CPU's
// static_cast.
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t FloatsToInt64(size_t n, const float* x, int64_t* out, cudaStream_t stream) {
  return cuda::LaunchForEach(n, stream,
                             [=] __device__(size_t i) { out[i] = static_cast<int64_t>(x[i]); });
}

}  // namespace easyscale::graph::cuda_ops
