// The Gemm op's element-wise CUDA kernels around cuda::Gemm, in gemm.cc's
// order: the epilogue alpha * P + beta * C, G = alpha * dY, and dC.
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t GemmEpilogue(int m, int n, float alpha, float beta, const float* c, size_t c_row_step,
                         size_t c_col_step, float* y, cudaStream_t stream) {
  return cuda::LaunchForEachInChannels(
      1, m, n, stream, [=] __device__(size_t e, size_t i, size_t j, size_t) {
        y[e] =
            c != nullptr ? alpha * y[e] + beta * c[i * c_row_step + j * c_col_step] : alpha * y[e];
      });
}

cudaError_t Scale(size_t n, float alpha, const float* x, float* out, cudaStream_t stream) {
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t e) { out[e] = alpha * x[e]; });
}

cudaError_t GemmBiasGrad(int m, int n, size_t c_size, float beta, const float* dy,
                         size_t c_row_step, size_t c_col_step, float* dc, cudaStream_t stream) {
  return cuda::LaunchForEach(c_size, stream, [=] __device__(size_t e) {
    // C element e is read by rows i with i * c_row_step == e's row part and
    // columns j likewise: all of them along a broadcast (step 0) dimension.
    const size_t row = c_row_step == 0 ? 0 : e / c_row_step;
    const size_t col = c_col_step == 0 ? 0 : (c_row_step == 0 ? e : e % c_row_step);
    const int i0 = c_row_step == 0 ? 0 : static_cast<int>(row), i1 = c_row_step == 0 ? m : i0 + 1;
    const int j0 = c_col_step == 0 ? 0 : static_cast<int>(col), j1 = c_col_step == 0 ? n : j0 + 1;
    float sum = 0.0f;
    for (int i = i0; i < i1; ++i) {
      for (int j = j0; j < j1; ++j) sum += dy[static_cast<size_t>(i) * n + j];
    }
    dc[e] = beta * sum;
  });
}

}  // namespace easyscale::graph::cuda_ops
