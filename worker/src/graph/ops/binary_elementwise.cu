// The binary element-wise ops' CUDA kernels: one formula evaluation per
// output (forward), and per operand element a gather of its terms in
// ascending output order from +0 (broadcast.h's reduction order); an operand
// broadcast along leading dimensions (a bias) through column_chains.cuh, in
// the op's blocks of rows, and operands that repeat along leading dimensions
// only (row_readers.h: the same shape, a bias, a scalar) indexed by one
// remainder instead of a division per dimension.
#include <cstdint>

#include "graph/ops/broadcast.cuh"
#include "graph/ops/column_chains.cuh"
#include "graph/ops/cuda_ops.h"
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/row_readers.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {
namespace {

RowReaders RowReadersOf(const BroadcastDims& bc, int operand) {
  return graph::RowReadersOf(bc.rank, bc.out, bc.steps[operand]);
}

// Both operands' element indices for output o, without broadcast.cuh's
// division per dimension where each operand repeats along the leading
// dimensions only (period = its RowReaders' cols: index o % period, o itself
// when the period is the whole output); period 0: the general map.
struct OperandPeriods {
  int64_t period[2] = {0, 0};
  int64_t outputs = 0;
  bool narrow = false;  // outputs fit 32 bits: a 32-bit remainder
};

OperandPeriods PeriodsOf(const BroadcastDims& bc) {
  OperandPeriods pp;
  pp.outputs = 1;
  for (int d = 0; d < bc.rank; ++d) pp.outputs *= bc.out[d];
  for (int k = 0; k < 2; ++k) {
    const RowReaders rr = RowReadersOf(bc, k);
    pp.period[k] = rr.rows > 0 ? rr.cols : 0;
  }
  pp.narrow = pp.outputs <= 0xffffffffLL;
  return pp;
}

__device__ inline int64_t PeriodIndex(const OperandPeriods& pp, int k, int64_t o) {
  const int64_t p = pp.period[k];
  if (p >= pp.outputs) return o;
  if (pp.narrow) return static_cast<uint32_t>(o) % static_cast<uint32_t>(p);
  return o % p;
}

__device__ inline void Indices(const BroadcastDims& bc, const OperandPeriods& pp, int64_t o,
                               int64_t* ia, int64_t* ib) {
  if (pp.period[0] == 0 || pp.period[1] == 0) {
    OperandIndices(bc, o, ia, ib);
    return;
  }
  *ia = PeriodIndex(pp, 0, o);
  *ib = PeriodIndex(pp, 1, o);
}

// Whether four consecutive outputs from a multiple of 4 read four consecutive
// elements of an operand repeating every `period` (the whole output, or rows
// of a multiple of 4: a bias of 768), 16-byte aligned, or one element (a
// scalar: the attention's scale).
bool ReadsInFours(int64_t period, int64_t outputs, const float* p) {
  return period == 1 ||
         (period > 0 && (period >= outputs || period % 4 == 0) && cuda::Aligned16(p));
}

// Operand k's four elements for outputs o ... o + 3 (o a multiple of 4), where
// ReadsInFours holds.
__device__ inline float4 OperandFour(const float* p, const OperandPeriods& pp, int k, int64_t o) {
  if (pp.period[k] == 1) return make_float4(p[0], p[0], p[0], p[0]);
  return reinterpret_cast<const float4*>(p)[PeriodIndex(pp, k, o) / 4];
}

}  // namespace

template <typename F>
cudaError_t BinaryForward(const BroadcastDims& bc, size_t n, const float* a, const float* b,
                          float* y, cudaStream_t stream) {
  const OperandPeriods pp = PeriodsOf(bc);
  if (n % 4 == 0 && ReadsInFours(pp.period[0], pp.outputs, a) &&
      ReadsInFours(pp.period[1], pp.outputs, b) && cuda::Aligned16(y)) {
    // Four outputs a thread through float4s: the same formula on each element,
    // with a warp's accesses contiguous (the encoder's bias and residual Adds,
    // its scale of the attention scores).
    return cuda::LaunchForEach(n / 4, stream, [=] __device__(size_t q) {
      const int64_t o = 4 * static_cast<int64_t>(q);
      const float4 x = OperandFour(a, pp, 0, o), z = OperandFour(b, pp, 1, o);
      reinterpret_cast<float4*>(y)[q] = make_float4(F::Apply(x.x, z.x), F::Apply(x.y, z.y),
                                                    F::Apply(x.z, z.z), F::Apply(x.w, z.w));
    });
  }
  return cuda::LaunchForEach(n, stream, [=] __device__(size_t o) {
    int64_t ia, ib;
    Indices(bc, pp, static_cast<int64_t>(o), &ia, &ib);
    y[o] = F::Apply(a[ia], b[ib]);
  });
}

template <typename F>
cudaError_t BinaryBackward(const BroadcastDims& bc, int operand, size_t operand_size,
                           const float* a, const float* b, const float* y, const float* dy,
                           float* grad, int64_t block, cudaStream_t stream) {
  const RowReaders rr = RowReadersOf(bc, operand);
  const OperandPeriods pp = PeriodsOf(bc);
  const bool rows_of_operand = rr.rows > 1 && static_cast<size_t>(rr.cols) == operand_size;
  // Only a bias's reduction has blocks (whole rows): refuse one where this
  // view of the operand disagrees, rather than run another order.
  if (block > 0 && (!rows_of_operand || block % rr.cols != 0)) return cudaErrorInvalidValue;
  if (rows_of_operand) {
    // One chain per element over its rows, or over each block of rows with the
    // blocks added in order (column_chains.cuh feeds them).
    return LaunchColumnChainsInBlocks<1>(
        rr.cols, rr.rows, block / rr.cols, stream,
        [=] __device__(int64_t t, int64_t e, float* term) {
          const int64_t o = t * rr.cols + e;
          int64_t ia, ib;
          Indices(bc, pp, o, &ia, &ib);
          term[0] = BinaryGradTerm<F>(operand, a, b, y, dy, ia, ib, o);
        },
        [] __device__(int64_t, float* sum, const float* term) { sum[0] += term[0]; },
        [=] __device__(int64_t e, const float* sum) { grad[e] = sum[0]; });
  }
  if (rr.rows == 1 && static_cast<size_t>(rr.cols) == operand_size) {
    // Not broadcast: each element's one reader is the output at its index.
    return cuda::LaunchForEach(operand_size, stream, [=] __device__(size_t e) {
      const int64_t o = static_cast<int64_t>(e);
      int64_t ia, ib;
      Indices(bc, pp, o, &ia, &ib);
      float sum = 0.0f;
      sum += BinaryGradTerm<F>(operand, a, b, y, dy, ia, ib, o);
      grad[e] = sum;
    });
  }
  return cuda::LaunchForEach(operand_size, stream, [=] __device__(size_t e) {
    float sum = 0.0f;
    ForEachReader(bc, operand, static_cast<int64_t>(e), [&](int64_t o, int64_t ia, int64_t ib) {
      sum += BinaryGradTerm<F>(operand, a, b, y, dy, ia, ib, o);
    });
    grad[e] = sum;
  });
}

#define ES_BINARY_OP(F)                                                                           \
  template cudaError_t BinaryForward<F>(const BroadcastDims&, size_t, const float*, const float*, \
                                        float*, cudaStream_t);                                    \
  template cudaError_t BinaryBackward<F>(const BroadcastDims&, int, size_t, const float*,         \
                                         const float*, const float*, const float*, float*,        \
                                         int64_t, cudaStream_t);
ES_BINARY_OP(AddFormula)
ES_BINARY_OP(SubFormula)
ES_BINARY_OP(MulFormula)
ES_BINARY_OP(DivFormula)
ES_BINARY_OP(PowFormula)
#undef ES_BINARY_OP

}  // namespace easyscale::graph::cuda_ops
