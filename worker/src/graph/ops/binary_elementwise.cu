// The binary element-wise ops' CUDA kernels: one formula evaluation per
// output (forward), and per operand element a gather of its terms in
// ascending output order from +0 (broadcast.h's reduction order).
#include "graph/ops/broadcast.cuh"
#include "graph/ops/cuda_ops.h"
#include "graph/ops/elementwise_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {
namespace {

// Operand `operand`'s term of one output (b's only where F has one).
template <typename F>
__device__ float GradTerm(int operand, float a, float b, float y, float dy) {
  if constexpr (F::kGradB) {
    if (operand == 1) return F::GradB(a, b, y, dy);
  }
  return F::GradA(a, b, y, dy);
}

}  // namespace

template <typename F>
cudaError_t BinaryForward(const BroadcastDims& bc, size_t n, const float* a, const float* b,
                          float* y, cudaStream_t stream) {
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t o) {
    int64_t ia, ib;
    OperandIndices(bc, static_cast<int64_t>(o), &ia, &ib);
    y[o] = F::Apply(a[ia], b[ib]);
  });
}

template <typename F>
cudaError_t BinaryBackward(const BroadcastDims& bc, int operand, size_t operand_size,
                           const float* a, const float* b, const float* y, const float* dy,
                           float* grad, cudaStream_t stream) {
  return cuda::LaunchForEach(operand_size, stream, [=] __device__(size_t e) {
    float sum = 0.0f;
    ForEachReader(bc, operand, static_cast<int64_t>(e), [&](int64_t o, int64_t ia, int64_t ib) {
      sum += GradTerm<F>(operand, a[ia], b[ib], y[o], dy[o]);
    });
    grad[e] = sum;
  });
}

#define ES_BINARY_OP(F)                                                                           \
  template cudaError_t BinaryForward<F>(const BroadcastDims&, size_t, const float*, const float*, \
                                        float*, cudaStream_t);                                    \
  template cudaError_t BinaryBackward<F>(const BroadcastDims&, int, size_t, const float*,         \
                                         const float*, const float*, const float*, float*,        \
                                         cudaStream_t);
ES_BINARY_OP(AddFormula)
ES_BINARY_OP(SubFormula)
ES_BINARY_OP(MulFormula)
ES_BINARY_OP(DivFormula)
ES_BINARY_OP(PowFormula)
#undef ES_BINARY_OP

}  // namespace easyscale::graph::cuda_ops
