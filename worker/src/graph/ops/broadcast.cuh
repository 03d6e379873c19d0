// File: worker/src/graph/ops/broadcast.cuh
//
// broadcast.h's index maps on a device (cuda_ops::BroadcastDims): the
// operand elements an output element reads, and, for the backward
// reductions, the output elements that read one operand element, in
// ascending output order (the order ReduceToOperand adds them in).
#pragma once

#include <cstdint>

#include "graph/ops/cuda_ops.h"

namespace easyscale::graph::cuda_ops {

// The element of operand a (*ia) and b (*ib) that output o reads.
__device__ inline void OperandIndices(const BroadcastDims& bc, int64_t o, int64_t* ia,
                                      int64_t* ib) {
  int64_t rest = o, a = 0, b = 0;
  for (int d = bc.rank; d-- > 0;) {
    const int64_t idx = rest % bc.out[d];
    rest /= bc.out[d];
    a += idx * bc.steps[0][d];
    b += idx * bc.steps[1][d];
  }
  *ia = a;
  *ib = b;
}

// Calls f(o, ia, ib) for every output o that reads element e of `operand`,
// o ascending: its index is fixed along the dimensions the operand has and
// runs row-major over those it is broadcast along. The indices step like an
// odometer (no division per reader: a reduction over thousands of readers is
// bound by its loads, not by index arithmetic).
template <typename F>
__device__ void ForEachReader(const BroadcastDims& bc, int operand, int64_t e, F&& f) {
  int64_t idx[kMaxRank], out_step[kMaxRank];
  int64_t readers = 1, o = 0, a = 0, b = 0, size = 1;
  for (int d = bc.rank; d-- > 0;) {
    out_step[d] = size;
    size *= bc.out[d];
  }
  for (int d = 0; d < bc.rank; ++d) {
    const int64_t step = bc.steps[operand][d];
    idx[d] = step != 0 ? e / step % bc.out[d] : 0;
    if (step == 0) readers *= bc.out[d];
    o += idx[d] * out_step[d];
    a += idx[d] * bc.steps[0][d];
    b += idx[d] * bc.steps[1][d];
  }
  for (int64_t t = 0; t < readers; ++t) {
    f(o, a, b);
    for (int d = bc.rank; d-- > 0;) {  // the next reader: the last broadcast dimension fastest
      if (bc.steps[operand][d] != 0) continue;
      const int64_t back = bc.out[d] - 1;
      if (idx[d] < back) {
        ++idx[d];
        o += out_step[d];
        a += bc.steps[0][d];
        b += bc.steps[1][d];
        break;
      }
      idx[d] = 0;
      o -= back * out_step[d];
      a -= back * bc.steps[0][d];
      b -= back * bc.steps[1][d];
    }
  }
}

}  // namespace easyscale::graph::cuda_ops
