// The unary element-wise ops' CUDA kernels: one formula evaluation per
// element, the formula of elementwise_formulas.h shared with the CPU.
#include "graph/ops/cuda_ops.h"
#include "graph/ops/elementwise_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

template <typename F>
cudaError_t UnaryForward(size_t n, const float* x, float* y, cudaStream_t stream) {
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t i) { y[i] = F::Apply(x[i]); });
}

template <typename F>
cudaError_t UnaryBackward(size_t n, const float* x, const float* y, const float* dy, float* dx,
                          cudaStream_t stream) {
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t i) {
    dx[i] = UnaryGrad<F>(x, y, dy, static_cast<int64_t>(i));
  });
}

#define ES_UNARY_OP(F)                                                                            \
  template cudaError_t UnaryForward<F>(size_t, const float*, float*, cudaStream_t);               \
  template cudaError_t UnaryBackward<F>(size_t, const float*, const float*, const float*, float*, \
                                        cudaStream_t);
ES_UNARY_OP(ReluFormula)
ES_UNARY_OP(SqrtFormula)
ES_UNARY_OP(ErfFormula)
ES_UNARY_OP(GeluFormula)
ES_UNARY_OP(TanhFormula)
ES_UNARY_OP(SigmoidFormula)
#undef ES_UNARY_OP

}  // namespace easyscale::graph::cuda_ops
