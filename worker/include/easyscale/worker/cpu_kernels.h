// File: easyscale/worker/cpu_kernels.h
//
// The CPU kernels. Every reduction has one fixed order, written next to each
// kernel, and uses explicit fma where the CUDA kernels do: the same operation
// sequence gives the same bits on any machine and any thread count. The build
// compiles this code with -ffp-contract=off, so no other fma appears.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace easyscale::cpu {

// C[i,j] = the sum over k of A[i,k]*B[k,j] in formulas::GemmOutput's order
// (kernel_formulas.h: fma chains over blocks of k, added in block order),
// starting from 0 (or from C[i,j] when accumulate). Row-major with leading
// dimensions.
void Gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
          bool accumulate);

// How Gemm runs: rows of scalar-order loops, or register tiles of AVX2's or
// AVX-512's width. Each keeps every element's chain, so all give the same bits;
// Gemm takes the widest this CPU runs (GemmWith: one named, for checks and
// benchmarks; one the CPU cannot run falls back to rows).
enum class GemmTiles { kRows, kAvx2, kAvx512 };
bool CanRun(GemmTiles tiles);
void GemmWith(GemmTiles tiles, int M, int N, int K, const float* A, int lda, const float* B,
              int ldb, float* C, int ldc, bool accumulate);

// dst[c, r] = src[r, c] for a rows x cols matrix.
void Transpose(int rows, int cols, const float* src, float* dst);

// One image's unfolding for a general 2-D convolution or its adjoint: cols has
// shape [C*KH*KW, OH*OW] with rows `ld` floats apart (ld >= OH*OW, so several
// images can sit side by side), row (c, ky, kx), column (oy, ox), all
// ascending, and entry x[c, oy*SH - PT + ky*DH, ox*SW - PL + kx*DW], 0 outside
// the image.
struct ConvGeometry {
  int C, H, W;  // input channels and size
  int KH, KW;   // kernel
  int SH, SW;   // strides
  int PT, PL;   // top and left pads (the bottom and right ones follow from OH, OW)
  int DH, DW;   // dilations
  int OH, OW;   // output size
};
// Whether the kernel is pointwise: 1x1, stride 1, no padding, so its columns
// are the input itself (no im2col, no tap table).
inline bool IsPointwise(const ConvGeometry& g) {
  return g.KH == 1 && g.KW == 1 && g.SH == 1 && g.SW == 1 && g.PT == 0 && g.PL == 0 &&
         g.OH == g.H && g.OW == g.W;
}
void Im2ColImage(const ConvGeometry& g, const float* x, float* cols, size_t ld);
// The output columns [lo, hi) whose input column ox * SW + x0 is in the image.
inline std::pair<int, int> InsideColumns(const ConvGeometry& g, int x0) {
  const int lo = x0 >= 0 ? 0 : (-x0 + g.SW - 1) / g.SW;
  const int hi = x0 >= g.W ? 0 : std::min(g.OW, (g.W - 1 - x0) / g.SW + 1);
  return {std::min(lo, g.OW), std::max(hi, std::min(lo, g.OW))};
}
// dx (zeroed here) gets the sum of every in-image column entry that maps to it,
// added in row-major order of cols: for one element, in (ky, kx) order.
void Col2ImImage(const ConvGeometry& g, const float* cols, size_t ld, float* dx);

// A channel sum over (b, p) runs in two levels, each ascending from 0: per
// sample b a chain over p, then the samples' results in b order. The samples'
// chains are independent (a GPU runs them in parallel); a chain is P long.
// bias_grad[c] = the channel sum of dy[b, c, p].
void ChannelSum(int B, int C, int P, const float* dy, float* bias_grad);

// Batch normalisation over (N, H, W) per channel. Training: mean and biased
// variance of the batch, as channel sums (above); running statistics updated
// with momentum and the unbiased variance. Saves mean and 1/sqrt(var + eps).
void BatchNormTrain(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                    float eps, float momentum, float* running_mean, float* running_var, float* y,
                    float* save_mean, float* save_invstd);
void BatchNormEval(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                   float eps, const float* running_mean, const float* running_var, float* y);
// The backward pass of BatchNormEval (fixed statistics): dgamma and dbeta are
// the channel sums of dy * xhat and dy, dx = dy * gamma / sqrt(var + eps).
// dx, dgamma and dbeta may each be null (not wanted).
void BatchNormEvalBackward(int B, int C, int P, const float* x, const float* dy, const float* gamma,
                           float eps, const float* running_mean, const float* running_var,
                           float* dx, float* dgamma, float* dbeta);
void BatchNormBackward(int B, int C, int P, const float* x, const float* dy, const float* gamma,
                       const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                       float* dbeta);

// Inverted dropout: keep element i when Uniform(key, counter_base + i/4, lane i%4) >= p,
// scaled by 1/(1-p). kept[i] is 1 for a kept element, else 0. With a residual
// (a Dropout+Add), y[i] = residual[i] + the dropped x[i], the Add's one sum.
void Dropout(size_t n, float p, uint32_t key0, uint32_t key1, uint64_t counter_base, const float* x,
             const float* residual, float* y, uint8_t* kept);
// Its gradient: dx = dy times the forward's scale of each element (0 or 1/(1-p)).
void DropoutBackward(size_t n, float p, const uint8_t* kept, const float* dy, float* dx);

// Mean softmax cross-entropy over rows; loss via the project's own exp/log.
// dlogits = (softmax - onehot) / rows. Returns the mean loss.
float SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                          float* dlogits);
// Row-wise argmax (first maximum wins).
void Argmax(int rows, int classes, const float* logits, int32_t* out);

}  // namespace easyscale::cpu
