// File: worker/src/graph/ops/cuda_ops.h
//
// The CUDA kernels of the graph ops' device halves that cuda_kernels.h does
// not already have, each defined in its op's .cu file beside the op's .cc
// and computing, per output, the operation order the op's file documents for
// its CPU kernel (so the bits are equal). Windows are cpu::ConvGeometry
// (channels C per group, input H x W, kernel, strides, top/left pads,
// dilations, output OH x OW). Each function enqueues work on `stream` and
// returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda_kernels.h"
#include "easyscale/worker/cpu_kernels.h"
#include "graph/ops/row_formulas.h"

namespace easyscale::graph::cuda_ops {

// A broadcast (broadcast.h's Broadcast) or strided view as kernels take it
// by value: up to kMaxRank dimensions; the ops with more refuse the device.
inline constexpr int kMaxRank = 8;
struct BroadcastDims {
  int rank = 0;
  int64_t out[kMaxRank] = {};
  int64_t steps[2][kMaxRank] = {};  // operand a's, operand b's (0: broadcast)
};

// unary_elementwise.cu: y = F::Apply(x), dx = F::Grad(x, y, dy) for the
// formulas of elementwise_formulas.h (instantiated for the unary ops' ones).
template <typename F>
cudaError_t UnaryForward(size_t n, const float* x, float* y, cudaStream_t stream);
template <typename F>
cudaError_t UnaryBackward(size_t n, const float* x, const float* y, const float* dy, float* dx,
                          cudaStream_t stream);

// dropout.cu: the mask output from the kept flags (all 1 for null flags).
cudaError_t DropoutMaskOutput(size_t n, const uint8_t* kept, int64_t* mask, cudaStream_t stream);

// max_pool.cu, over `planes` images: y and the winning tap's index in its
// image (-1: none) per output; dx (every element written) gathers dy of the
// outputs whose argmax it is, in ascending output order.
cudaError_t MaxPoolForward(int planes, const cpu::ConvGeometry& g, const float* x, float* y,
                           int32_t* argmax, cudaStream_t stream);
cudaError_t MaxPoolBackward(int planes, const cpu::ConvGeometry& g, const float* dy,
                            const int32_t* argmax, float* dx, cudaStream_t stream);

// average_pool.cu: y = in-image tap sum / divisor[output position]; dx (every
// element written) gathers dy / divisor of the outputs reading it, ascending.
cudaError_t AveragePoolForward(int planes, const cpu::ConvGeometry& g, const float* divisor,
                               const float* x, float* y, cudaStream_t stream);
cudaError_t AveragePoolBackward(int planes, const cpu::ConvGeometry& g, const float* divisor,
                                const float* dy, float* dx, cudaStream_t stream);

// gemm.cu, the Gemm op's element-wise steps around cuda::Gemm, with C read at
// i * c_row_step + j * c_col_step (a broadcast C):
// y = alpha * y + beta * C (or alpha * y without C);
cudaError_t GemmEpilogue(int m, int n, float alpha, float beta, const float* c, size_t c_row_step,
                         size_t c_col_step, float* y, cudaStream_t stream);
// out = alpha * x over n elements;
cudaError_t Scale(size_t n, float alpha, const float* x, float* out, cudaStream_t stream);
// dc[e] = beta * (the sum from 0 of dy[i, j] over the (i, j) reading C element
// e, in row-major order), for the c_size elements of C.
cudaError_t GemmBiasGrad(int m, int n, size_t c_size, float beta, const float* dy,
                         size_t c_row_step, size_t c_col_step, float* dc, cudaStream_t stream);

// conv.cu, for group `group` of `groups` of a batch of B NCHW images with M
// filters per group, in conv.cc's orders (implicit GEMMs: no columns):
// table[kc] for kc = (c, ky, kx) = {c*H*W + ky*DH*W + kx*DW, ky*DH << 16 |
// kx*DW}, which ConvForward and ConvWeightGrad read (the conv's MakeConv keeps
// the dilated kernel's extent below 2^15);
cudaError_t ConvTapTable(const cpu::ConvGeometry& g, int2* table, cudaStream_t stream);
// y's group channels (w, bias: the group's; bias may be null); table: null
// for a pointwise convolution (cpu::IsPointwise), which reads its planes as
// they are; wt: [C*KH*KW, M] scratch (the weights k-major); cm: [M, B*P]
// scratch, used only when C*KH*KW > formulas::kGemmKBlock;
cudaError_t ConvForward(int B, int groups, int group, int M, const cpu::ConvGeometry& g,
                        const int2* table, const float* x, const float* w, const float* bias,
                        float* wt, float* cm, float* y, cudaStream_t stream);
// dx of the group's channels (every element written); wt: [C*KH*KW, M]
// scratch (null for a pointwise convolution: it reads W as it is);
// cudaErrorNotSupported for M > formulas::kGemmKBlock;
cudaError_t ConvInputGrad(int B, int groups, int group, int M, const cpu::ConvGeometry& g,
                          const float* w, const float* dy, float* wt, float* dx,
                          cudaStream_t stream);
// dw of the group's filters [M, C*KH*KW] (every element written), its chains
// in k blocks of k_block (conv.cc's dw_block_);
cudaError_t ConvWeightGrad(int B, int groups, int group, int M, const cpu::ConvGeometry& g,
                           int k_block, const int2* table, const float* x, const float* dy,
                           float* dw, cudaStream_t stream);
// A depthwise convolution's (one channel and one filter per group, all
// `groups` at once; w [groups, KH*KW]): y from bias (may be null), dx, dw,
// every element written;
cudaError_t DepthwiseForward(int B, int groups, const cpu::ConvGeometry& g, const float* x,
                             const float* w, const float* bias, float* y, cudaStream_t stream);
cudaError_t DepthwiseInputGrad(int B, int groups, const cpu::ConvGeometry& g, const float* w,
                               const float* dy, float* dx, cudaStream_t stream);
cudaError_t DepthwiseWeightGrad(int B, int groups, const cpu::ConvGeometry& g, int k_block,
                                const float* x, const float* dy, float* dw, cudaStream_t stream);
// dx of the group's channels (every element written) as cpu::Col2ImImage
// folds each image's columns cols [C*KH*KW, B*OH*OW] (row (c, ky, kx), column
// (b, oy, ox)) back;
cudaError_t ConvFoldColumns(int B, int groups, int group, const cpu::ConvGeometry& g,
                            const float* cols, float* dx, cudaStream_t stream);
// cm [M, B*P] = per-row value (bias[m], or 0 for a null bias);
cudaError_t FillRows(int rows, size_t cols, const float* per_row, float* cm, cudaStream_t stream);
// y[b, group*M + m, p] = cm[m, b*P + p] (to_nchw) or back, for `total`
// channels of y.
cudaError_t GroupLayout(int B, int total, int group, int M, int P, bool to_nchw, const float* src,
                        float* dst, cudaStream_t stream);

// binary_elementwise.cu, for the formulas of the binary ops (float32):
// y[o] = F::Apply(a[ia], b[ib]) per output; grad (operand 0: a, 1: b, of
// operand_size elements, every element written) = the sum from +0 of
// F::GradA / F::GradB over the outputs reading it, in ascending output order,
// in blocks of `block` outputs (broadcast.h's BinaryReductionBlock; 0: one
// chain) added in order; takes operand_size * blocks floats of stream-ordered
// scratch then.
template <typename F>
cudaError_t BinaryForward(const BroadcastDims& bc, size_t n, const float* a, const float* b,
                          float* y, cudaStream_t stream);
template <typename F>
cudaError_t BinaryBackward(const BroadcastDims& bc, int operand, size_t operand_size,
                           const float* a, const float* b, const float* y, const float* dy,
                           float* grad, int64_t block, cudaStream_t stream);

// reduce_mean.cu, `bc` broadcasting X (operand a) with the kept-dims output
// (operand b): y[e] = (sum from +0 of x over the outputs reading e,
// ascending) / count; dx[o] = dy[ib] / count over the n elements of X.
cudaError_t ReduceMeanForward(const BroadcastDims& bc, size_t y_size, float count, const float* x,
                              float* y, cudaStream_t stream);
cudaError_t ReduceMeanBackward(const BroadcastDims& bc, size_t n, float count, const float* dy,
                               float* dx, cudaStream_t stream);

// global_average_pool.cu: y[p] = (sum from 0 of the plane's positions) /
// positions; dx = dy[p] / positions.
cudaError_t GlobalAveragePoolForward(size_t planes, size_t positions, const float* x, float* y,
                                     cudaStream_t stream);
cudaError_t GlobalAveragePoolBackward(size_t planes, size_t positions, const float* dy, float* dx,
                                      cudaStream_t stream);

// clip.cu: clip.cc's selects per element.
cudaError_t ClipForward(size_t n, float lo, float hi, const float* x, float* y,
                        cudaStream_t stream);
cudaError_t ClipBackward(size_t n, float lo, float hi, const float* x, const float* dy, float* dx,
                         cudaStream_t stream);

// Softmax+Dropout's dropout (softmax.cc): the forward's draw, its dropped
// output and kept flags (cuda::Dropout's); the backward reads draw.p and kept.
struct SoftmaxDropout {
  cuda::DropoutDraw draw;
  float* dropped = nullptr;
  uint8_t* kept = nullptr;
};

// softmax.cu, rows of n elements `inner` apart (rows are (outer, inner)
// pairs), each by one thread: softmax.cc's order. `scale`, where given (Mul+
// Softmax), multiplies each x before the row's formulas and each dx after
// them (MulFormula's forward and gradient). `dropout`, where given, drops y
// into its output, and its gradient's dy is the dropped output's (the
// Dropout's gradient runs first).
cudaError_t SoftmaxForward(size_t outer, size_t n, size_t inner, bool log, SoftmaxScale scale,
                           const float* x, float* y, const SoftmaxDropout* dropout,
                           cudaStream_t stream);
cudaError_t SoftmaxBackward(size_t outer, size_t n, size_t inner, bool log, SoftmaxScale scale,
                            const float* y, const float* dy, const SoftmaxDropout* dropout,
                            float* dx, cudaStream_t stream);

// layer_normalization.cu, rows of n elements (null scale: 1, null bias: 0):
// the per-row mean and invstd, then y; backward dscale and dbias (each
// nullable, summed over rows ascending from +0, in blocks of block_rows rows
// added in order: formulas::ColumnSumBlockRows, 0 for one chain) and dx
// (nullable).
cudaError_t LayerNormForward(size_t rows, size_t n, float epsilon, const float* x,
                             const float* scale, const float* bias, float* y, float* mean,
                             float* invstd, cudaStream_t stream);
cudaError_t LayerNormBackward(size_t rows, size_t n, const float* x, const float* scale,
                              const float* dy, const float* mean, const float* invstd,
                              int64_t block_rows, float* row_sums, float* dx, float* dscale,
                              float* dbias, cudaStream_t stream);

// gather.cu (float data): out[o, p, i] = data[o, index(p), i]; dx[o, r, i]
// (every element written) = the sum from 0 of dy[o, p, i] over the positions
// p with index(p) = r, ascending. Negative indices count from the end; an
// index out of range reads 0 and adds nowhere (the CPU refuses it).
cudaError_t GatherForward(size_t outer, size_t axis_dim, size_t positions, size_t inner,
                          const float* data, const int64_t* indices, float* out,
                          cudaStream_t stream);
cudaError_t GatherBackward(size_t outer, size_t axis_dim, size_t positions, size_t inner,
                           const float* dy, const int64_t* indices, float* dx, cudaStream_t stream);

// layout_util.cu, a strided view (layout_util.h's ForEachStrided over
// view.out with strides view.steps[0]) of 4- or 8-byte elements:
// dst[d] = src[offset + ...] (gather), or dst[offset + ...] = src[d] (scatter).
cudaError_t StridedCopy(const BroadcastDims& view, int64_t offset, size_t element_bytes,
                        bool scatter, const void* src, void* dst, cudaStream_t stream);

// cast.cu: out[i] = (int64_t)x[i] (token ids that arrive as floats).
cudaError_t FloatsToInt64(size_t n, const float* x, int64_t* out, cudaStream_t stream);

}  // namespace easyscale::graph::cuda_ops
