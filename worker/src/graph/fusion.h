// File: worker/src/graph/fusion.h
//
// Rewrites of a graph into fewer nodes that compute the same bits, so a pass
// keeps fewer values for its backward and runs fewer kernels. Program applies
// them to its own copy of the graph before making the ops.
#pragma once

#include "easyscale/worker/graph.h"

namespace easyscale::graph {

// Replaces each GELU that PyTorch exports below opset 20,
//   t1 = Div(X, s)  t2 = Erf(t1)  t3 = Add(t2, one)  t4 = Mul(X, t3)  Y = Mul(t4, half)
// with s, one and half the loader's scalar constants float(sqrt 2), 1 and 0.5,
// by one Gelu node X -> Y at the Div's place (ops/gelu.cc keeps the chain's
// operations, and its gradient the chain's rules, in order). Only where the
// result is the same bits: t1..t4 have no other reader and are no graph
// output, Y has X's shape, and X's other readers come after the Mul(X, t3),
// so X's gradient still starts with the Div's and the Mul's contributions
// (program.h's order). Drops t1..t4 from the graph's values. Returns how many
// chains it fused.
int FuseGeluChains(Graph& graph);

// Replaces each linear layer as PyTorch exports it over more than two
// dimensions, Y = MatMul(X, W) and Z = Add(Y, b) or Add(b, Y) with W 2-D and
// b a float32 initializer of shape [N] (Y's last dimension), by one
// "MatMul+Add" node (X, W, b) -> Z at the MatMul's place, with attribute
// "bias_first" 1 where b was the Add's first operand (ops/mat_mul.cc adds b
// to each finished product row as the Add did, and its gradient is the Add's
// rule; on a device in the GEMM's store). Only where the result is the same
// bits: Y has no other reader and is no graph output, and b has no other
// reader (its gradient is the Add's alone) and is no graph input. Drops Y
// from the graph's values. Returns how many layers it fused.
int FuseMatMulBiases(Graph& graph);

// Replaces each weight's transpose as PyTorch exports a linear layer over more
// than two dimensions, Wt = Transpose(W) with W 2-D and perm [1, 0], read by a
// MatMul or MatMul+Add (after FuseMatMulBiases) as its B, by reading W there:
// the node becomes a "Transpose+MatMul" or "Transpose+MatMul+Add" (X, W[, b])
// (ops/mat_mul.cc multiplies by W's transpose, computes X's gradient from W
// as stored and W's as the Transpose's gradient made it). Only where the
// result is the same bits: Wt has no other reader and is no graph output, and
// W has no other reader (its gradient is the product's alone). Drops the
// Transpose and Wt. Returns how many it fused.
int FuseTransposedWeights(Graph& graph);

// Replaces the Transposes around a batched MatMul (the attention's head
// splits, its keys' transpose and its heads' merge as PyTorch exports them)
// by reading and writing the tensors in place: the MatMul becomes a
// "StridedMatMul" whose inputs are the Transposes' inputs, with attributes
// perm_a and perm_b their perms, and whose output is the output Transpose's,
// with attribute perm_y (ops/mat_mul.cc). The MatMul: rank 3 or 4, no batch
// broadcast, M, K and N at most formulas::kGemmKBlock, at most 65535 entries
// in a rank-4 batch's second dimension. An operand's Transpose fuses where
// the product alone reads its output (no graph output), it alone reads its
// float32 input, and its perm keeps the tensor's last dimension the view's
// last or second last; the output's where it alone reads the product's
// output (no graph output) and its perm puts the product's last or second
// last dimension last. A Reshape before an operand's Transpose (the heads
// split from a projection's rows) fuses too where it alone reads its float32
// input and that Transpose alone reads its output (no graph output), and one
// after the output's (the heads merged) where it alone reads that output:
// attributes shape_a, shape_b and shape_y hold its shape. Drops the fused
// nodes and the values between. Returns how many products it fused.
int FuseTransposedOperands(Graph& graph);

// Replaces each Mul of a value X by a float32 scalar constant c (the loader's,
// either operand) whose product a Softmax alone reads, with X's shape (the
// attention's scores times 1/sqrt(d)), by one "Mul+Softmax" node X -> the
// Softmax's output at the Mul's place, with the Softmax's attributes and
// "scale" = c (ops/softmax.cc multiplies each element by c before the rows'
// formulas, and each gradient element after them, as the Mul did). Only
// where the result is the same bits: the product is no graph output. Drops
// the product. Returns how many it fused.
int FuseScaledSoftmax(Graph& graph);

// Replaces each BatchNormalization whose output Y a Relu or a Clip alone
// reads (Y no graph output), R = Relu(Y) or Clip(Y, min, max) with bounds the
// loader's constants or absent, by one "BatchNormalization+Relu" or
// "BatchNormalization+Clip" node with the BatchNormalization's inputs (and
// the Clip's bounds as inputs 5 and 6, or its min and max attributes before
// opset 11), attributes and outputs but R for Y, at its place
// (ops/batch_normalization.cc applies the activation to each output element
// as the Relu or Clip did, and its gradient's rule reads Y recomputed from X,
// as the activation's rule read Y). Drops Y. Returns how many it fused.
int FuseBatchNormActivations(Graph& graph);

// Replaces each Softmax or Mul+Softmax (after FuseScaledSoftmax) whose output
// Y a Dropout alone reads, D = Dropout(Y) (the attention's probabilities
// dropped), by one "Softmax+Dropout" node (X, ratio, training_mode) -> (D, Y)
// at the Softmax's place, with the Softmax's attributes (ops/softmax.cc drops
// each row as it is stored; the backward reads Y and D's gradient). Only
// where the result is the same bits: Y is no graph output, the Dropout's mask
// is unread, and no node between the two draws dropout numbers (so the
// Dropout's draw keeps its place among the EST's). Drops the Dropout's mask.
// Returns how many it fused.
int FuseSoftmaxDropouts(Graph& graph);

// Replaces each residual connection as PyTorch exports it, D = Dropout(X)
// and Z = Add(P, D) or Add(D, P) with P, D and Z float32 of one shape, by one
// "Dropout+Add" node (X, ratio, training_mode, P) -> Z at the Dropout's place
// (ops/dropout.cc adds each dropped element to P's as the Add did; the
// Dropout keeps its place among the dropouts, so each EST's mask stays its
// own). Only where the result is the same bits: D has no other reader and is
// no graph output, the Dropout's mask is unread, P exists at the Dropout
// (an input, an initializer or an earlier node's output) and no node between
// the Dropout and the Add reads it (P's gradient adds its readers'
// contributions in node order). Drops D. Returns how many it fused.
int FuseDropoutAdds(Graph& graph);

}  // namespace easyscale::graph
