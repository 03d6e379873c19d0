// LayerNormalization's CUDA kernels: layer_normalization.cc's order, one
// thread per row for its statistics and sums (ascending index), one per
// element for the outputs, one per column for dScale and dB (rows ascending).
#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/cuda_ops.h"
#include "graph/ops/row_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t LayerNormForward(size_t rows, size_t n, float epsilon, const float* x,
                             const float* scale, const float* bias, float* y, float* mean,
                             float* invstd, cudaStream_t stream) {
  cudaError_t err = cuda::LaunchForEach(rows, stream, [=] __device__(size_t r) {
    LayerNormRowStats(x + r * n, static_cast<int64_t>(n), epsilon, &mean[r], &invstd[r]);
  });
  if (err != cudaSuccess) return err;
  return cuda::LaunchForEach(rows * n, stream, [=] __device__(size_t e) {
    const size_t r = e / n;
    y[e] = LayerNormOutput(x[e], mean[r], invstd[r], scale, bias, static_cast<int64_t>(e % n));
  });
}

cudaError_t LayerNormBackward(size_t rows, size_t n, const float* x, const float* scale,
                              const float* dy, const float* mean, const float* invstd,
                              float* row_sums, float* dx, float* dscale, float* dbias,
                              cudaStream_t stream) {
  if (dscale != nullptr || dbias != nullptr) {
    const cudaError_t err = cuda::LaunchForEach(n, stream, [=] __device__(size_t j) {
      float ds = 0.0f, db = 0.0f;
      for (size_t r = 0; r < rows; ++r) {
        const size_t e = r * n + j;
        if (dscale != nullptr) ds += dy[e] * ((x[e] - mean[r]) * invstd[r]);
        if (dbias != nullptr) db += dy[e];
      }
      if (dscale != nullptr) dscale[j] = ds;
      if (dbias != nullptr) dbias[j] = db;
    });
    if (err != cudaSuccess) return err;
  }
  if (dx == nullptr) return cudaSuccess;
  const float count = static_cast<float>(n);
  const cudaError_t err = cuda::LaunchForEach(rows, stream, [=] __device__(size_t r) {
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (size_t j = 0; j < n; ++j) {
      const float g = dy[r * n + j] * (scale ? scale[j] : 1.0f);
      formulas::FoldBatchNormGrads(x[r * n + j], g, mean[r], invstd[r], &sum_g, &sum_gx);
    }
    row_sums[2 * r] = sum_g;
    row_sums[2 * r + 1] = sum_gx;
  });
  if (err != cudaSuccess) return err;
  return cuda::LaunchForEach(rows * n, stream, [=] __device__(size_t e) {
    const size_t r = e / n, j = e % n;
    const float g = dy[e] * (scale ? scale[j] : 1.0f);
    const float k = invstd[r] / count;
    dx[e] = formulas::BatchNormInputGrad(x[e], g, mean[r], invstd[r], k, count, row_sums[2 * r],
                                         row_sums[2 * r + 1]);
  });
}

}  // namespace easyscale::graph::cuda_ops
