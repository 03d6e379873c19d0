// Softmax's and LogSoftmax's CUDA kernels: softmax.cc's order, one thread
// per row (its maximum, sums and outputs in ascending index).
#include "easyscale/worker/detmath.h"
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t SoftmaxForward(size_t outer, size_t n, size_t inner, bool log, const float* x, float* y,
                           cudaStream_t stream) {
  return cuda::LaunchForEach(outer * inner, stream, [=] __device__(size_t r) {
    const size_t base = r / inner * n * inner + r % inner;
    float m = x[base];
    for (size_t j = 1; j < n; ++j) m = x[base + j * inner] > m ? x[base + j * inner] : m;
    float s = 0.0f;
    for (size_t j = 0; j < n; ++j) {
      const float e = detmath::Exp(x[base + j * inner] - m);
      if (!log) y[base + j * inner] = e;
      s += e;
    }
    if (log) {
      const float log_s = detmath::Log(s);
      for (size_t j = 0; j < n; ++j) y[base + j * inner] = (x[base + j * inner] - m) - log_s;
    } else {
      for (size_t j = 0; j < n; ++j) y[base + j * inner] = y[base + j * inner] / s;
    }
  });
}

cudaError_t SoftmaxBackward(size_t outer, size_t n, size_t inner, bool log, const float* y,
                            const float* dy, float* dx, cudaStream_t stream) {
  return cuda::LaunchForEach(outer * inner, stream, [=] __device__(size_t r) {
    const size_t base = r / inner * n * inner + r % inner;
    float t = 0.0f;
    for (size_t j = 0; j < n; ++j) {
      const size_t k = base + j * inner;
      t += log ? dy[k] : dy[k] * y[k];
    }
    for (size_t j = 0; j < n; ++j) {
      const size_t k = base + j * inner;
      dx[k] = log ? dy[k] - detmath::Exp(y[k]) * t : y[k] * (dy[k] - t);
    }
  });
}

}  // namespace easyscale::graph::cuda_ops
