// Softmax's and LogSoftmax's CUDA kernels: one thread per row, running
// row_formulas.h's row, as softmax.cc does.
#include "graph/ops/cuda_ops.h"
#include "graph/ops/row_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t SoftmaxForward(size_t outer, size_t n, size_t inner, bool log, const float* x, float* y,
                           cudaStream_t stream) {
  return cuda::LaunchForEach(outer * inner, stream, [=] __device__(size_t r) {
    const size_t base = r / inner * n * inner + r % inner;
    SoftmaxRow(x + base, y + base, static_cast<int64_t>(n), static_cast<int64_t>(inner), log);
  });
}

cudaError_t SoftmaxBackward(size_t outer, size_t n, size_t inner, bool log, const float* y,
                            const float* dy, float* dx, cudaStream_t stream) {
  return cuda::LaunchForEach(outer * inner, stream, [=] __device__(size_t r) {
    const size_t base = r / inner * n * inner + r % inner;
    SoftmaxRowGradient(y + base, dy + base, dx + base, static_cast<int64_t>(n),
                       static_cast<int64_t>(inner), log);
  });
}

}  // namespace easyscale::graph::cuda_ops
