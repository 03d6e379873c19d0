// File: worker/src/graph/ops/broadcast.h
//
// Numpy broadcasting of two operands, shared by the element-wise binary ops:
// the output shape, the map from an output element to each operand's element,
// and the backward reduction of an output-shaped gradient to an operand's
// shape.
//
// Reduction order: an operand element's gradient is the sum of the terms of
// the output elements it was broadcast to, added one at a time from +0 in
// ascending output index (row-major), in float; with a block (a binary op's
// gradient, BinaryReductionBlock), that sum over each block of the output's
// indices from +0, the blocks' sums added in order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "graph/op.h"

namespace easyscale::graph {

struct Broadcast {
  Shape out;
  // Per output dimension, the element step of each operand (0 where the
  // operand has size 1 there or lacks the dimension).
  std::vector<int64_t> a_steps, b_steps;
};

// The broadcast of shapes `a` and `b`; InvalidArgument naming the node and
// both shapes when a dimension pair is neither equal nor has a 1.
StatusOr<Broadcast> MakeBroadcast(const Node& node, const Shape& a, const Shape& b);

// Whether operand `operand` (0: a, 1: b) is read at each output's own index:
// its shape is the output's (sizes of 1 aside), so nothing is broadcast.
bool NotBroadcast(const Broadcast& bc, int operand);

// Calls f(o, ia, ib) for every output index o in ascending order, with the
// element indices of operand a and b that output element reads.
template <typename F>
void ForEachBroadcast(const Broadcast& bc, F&& f) {
  const int64_t total = NumElements(bc.out);
  if (total == 0) return;
  const size_t rank = bc.out.size();
  if (rank == 0) {
    f(int64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  const int64_t inner = bc.out[rank - 1];
  const int64_t sa = bc.a_steps[rank - 1], sb = bc.b_steps[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t o = 0; o < total; o += inner) {
    for (int64_t k = 0; k < inner; ++k) f(o + k, ia + k * sa, ib + k * sb);
    // Step the outer dimensions like an odometer.
    for (size_t d = rank - 1; d-- > 0;) {
      ia += bc.a_steps[d];
      ib += bc.b_steps[d];
      if (++index[d] < bc.out[d]) break;
      ia -= bc.a_steps[d] * bc.out[d];
      ib -= bc.b_steps[d] * bc.out[d];
      index[d] = 0;
    }
  }
}

// The output elements in each block of a binary op's gradient reduction to
// operand `operand`, 0 for one chain: where the operand is broadcast along
// leading dimensions only (a bias: each element read once in every row of an
// [R, C] view of the output), formulas::ColumnSumBlockRows's blocks of whole
// rows of the output's first dimension (its samples): independent chains a
// GPU runs side by side (the encoder's biases: 32 blocks of 128 rows). Every
// element is read in every block.
int64_t BinaryReductionBlock(const Broadcast& bc, int operand);

// Operand `operand` (0: a, 1: b)'s gradient into `grad` (sized to the
// operand): grad[i] = sum of term(o, ia, ib) over the output elements o that
// read element i, in the order above: in blocks of `block` outputs (whose
// every block reads every element: BinaryReductionBlock's) or, for 0, one
// chain.
template <typename Term>
void ReduceToOperand(const Broadcast& bc, int operand, Term&& term, std::vector<float>& grad,
                     int64_t block = 0) {
  std::fill(grad.begin(), grad.end(), 0.0f);
  if (block == 0) {
    ForEachBroadcast(bc, [&](int64_t o, int64_t ia, int64_t ib) {
      grad[operand == 0 ? ia : ib] += term(o, ia, ib);
    });
    return;
  }
  std::vector<float> part(grad.size());
  ForEachBroadcast(bc, [&](int64_t o, int64_t ia, int64_t ib) {
    const int64_t i = operand == 0 ? ia : ib;
    if (o < block) {
      grad[i] += term(o, ia, ib);
      return;
    }
    if (o % block == 0) std::fill(part.begin(), part.end(), 0.0f);
    part[i] += term(o, ia, ib);
    if ((o + 1) % block == 0) {
      for (size_t e = 0; e < grad.size(); ++e) grad[e] = grad[e] + part[e];
    }
  });
}

}  // namespace easyscale::graph
