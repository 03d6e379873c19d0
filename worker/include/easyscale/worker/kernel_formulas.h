// File: easyscale/worker/kernel_formulas.h
//
// The per-element and per-channel formulas the CPU kernels (cpu_kernels.cc) and
// their CUDA twins (worker/src/cuda/) share: one definition, compiled for both,
// so both devices run the same operations in the same order. The reductions'
// loops (and their fixed order) stay with each kernel.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "easyscale/worker/detmath.h"
#include "easyscale/worker/fixed_point.h"
#include "easyscale/worker/philox.h"

namespace easyscale::formulas {

// The GEMM's k order, on every device: k runs in blocks of kGemmKBlock; block b
// is one fma chain over its k ascending, from 0 (block 0: from the initial
// value), and the blocks' results are added in block order. One block for
// K <= kGemmKBlock, so short products are a single chain; the blocks of a long
// product (a weight gradient summed over a batch) can run in parallel. A
// constant, never a function of the device, so the bits stay the same.
inline constexpr int kGemmKBlock = 4096;

// The k block of a weight gradient (MatMul's shared B, Conv's W): a sum
// over every sample's rows, few outputs over long chains. Where kGemmKBlock
// blocks would give fewer than kWeightGradientTiles 128x128 output tiles in
// all, blocks of whole samples instead, as many as give about that many (at
// most one a sample, all the same size, each at most kGemmKBlock rows). From
// the shapes only, so every device runs the same order; it lets a GPU run a
// weight gradient's blocks side by side (the encoder's 768x768 ones: 16
// blocks of 2 samples of 128 rows, its 768x3072 ones 4 of 8).
inline constexpr int64_t kWeightGradientTiles = 512;
inline int WeightGradientKBlock(int64_t samples, int64_t sample_rows, int64_t out_rows,
                                int64_t out_cols) {
  const int64_t tiles = ((out_rows + 127) / 128) * ((out_cols + 127) / 128);
  const int64_t wanted = (kWeightGradientTiles + tiles - 1) / tiles;
  const int64_t blocks = (samples * sample_rows + kGemmKBlock - 1) / kGemmKBlock;
  if (wanted <= blocks) return kGemmKBlock;
  int64_t group = wanted < samples ? samples / wanted : 1;
  while (samples % group != 0) --group;
  // One group of every sample is the usual order (one chain when it fits a block).
  return group < samples && group * sample_rows <= kGemmKBlock
             ? static_cast<int>(group * sample_rows)
             : kGemmKBlock;
}

// The rows in each block of a per-column sum over rows (a bias's gradient, a
// normalization's scale and shift gradients: `outputs` sums over `rows` rows,
// `samples` of them whole samples): WeightGradientKBlock's blocks of whole
// samples where it gives them (shorter than kGemmKBlock); 0 (one chain)
// otherwise. Each block a chain from +0, the blocks' sums added in order.
inline int64_t ColumnSumBlockRows(int64_t samples, int64_t rows, int64_t outputs) {
  if (samples < 1 || rows <= 1 || rows % samples != 0) return 0;
  const int64_t block = WeightGradientKBlock(samples, rows / samples, 1, outputs);
  return block < kGemmKBlock ? block : 0;
}

// One output C[i,j] in that order: a points at A[i,0] and steps by a_step, b at
// B[0,j] and steps by b_step; k_block other than kGemmKBlock only for a weight
// gradient's (WeightGradientKBlock). The specification the GEMM kernels are
// checked against.
ES_HD float GemmOutput(int K, const float* a, size_t a_step, const float* b, size_t b_step,
                       float init, int k_block = kGemmKBlock) {
  float sum = init;
  for (int k0 = 0; k0 < K; k0 += k_block) {
    const int k1 = K - k0 < k_block ? K : k0 + k_block;
    float chain = k0 == 0 ? init : 0.0f;
    for (int k = k0; k < k1; ++k) chain = detmath::Fma(a[k * a_step], b[k * b_step], chain);
    sum = k0 == 0 ? chain : sum + chain;
  }
  return sum;
}

// One element's step in BatchNorm's per-sample channel chains: the squared
// deviation, and the backward pass's two sums (dy, and dy * xhat).
ES_HD void FoldSquaredDeviation(float x, float mean, float* sum_sq) {
  const float d = x - mean;
  *sum_sq = detmath::Fma(d, d, *sum_sq);
}
ES_HD void FoldBatchNormGrads(float x, float dy, float mean, float invstd, float* sum_dy,
                              float* sum_dy_xhat) {
  const float xhat = (x - mean) * invstd;
  *sum_dy += dy;
  *sum_dy_xhat = detmath::Fma(dy, xhat, *sum_dy_xhat);
}

// y = (x - mean) * scale + beta, with scale = gamma / std.
ES_HD float BatchNormOutput(float x, float mean, float scale, float beta) {
  return detmath::Fma(x - mean, scale, beta);
}

ES_HD float InvStd(float var, float eps) { return 1.0f / sqrtf(var + eps); }

// A channel's statistics from its mean and sum of squared deviations over
// `count` values: the saved 1/std and the running statistics' update (the
// unbiased variance, as PyTorch's).
ES_HD void BatchNormFinish(float mean, float sum_sq, float count, float eps, float momentum,
                           float* save_invstd, float* running_mean, float* running_var) {
  const float var = sum_sq / count;
  *save_invstd = InvStd(var, eps);
  const float unbiased = count > 1.0f ? sum_sq / (count - 1.0f) : var;
  *running_mean = (1.0f - momentum) * *running_mean + momentum * mean;
  *running_var = (1.0f - momentum) * *running_var + momentum * unbiased;
}

// dx = gamma*invstd/count * (count*dy - sum_dy - xhat*sum_dy_xhat); `k` is
// gamma * invstd / count.
ES_HD float BatchNormInputGrad(float x, float dy, float mean, float invstd, float k, float count,
                               float sum_dy, float sum_dy_xhat) {
  const float xhat = (x - mean) * invstd;
  return k * detmath::Fma(-xhat, sum_dy_xhat, count * dy - sum_dy);
}

// ReLU: max(x, 0) with NaN and -0 kept; its gradient from its output y,
// which is > 0 exactly where x is.
ES_HD float Relu(float x) { return x < 0.0f ? 0.0f : x; }
ES_HD float ReluGrad(float y, float dy) { return y > 0.0f ? dy : 0.0f; }

// Clip: min(max(x, lo), hi) with NaN kept; its gradient from its input x
// (PyTorch's clamp rule: dy where lo <= x <= hi, else 0).
ES_HD float Clip(float x, float lo, float hi) {
  const float v = x < lo ? lo : x;
  return v > hi ? hi : v;
}
ES_HD float ClipGrad(float x, float dy, float lo, float hi) {
  return x >= lo && x <= hi ? dy : 0.0f;
}

// The activation a BatchNormalization+Relu or +Clip applies to each output y
// (as the Relu or Clip op computes it), and its gradient from y and dy: the
// backward pass recomputes y from x, so neither y nor the activation's output
// need be kept, and the batch norm's passes take the activation's gradient in.
struct Activation {
  enum Kind : int { kNone, kRelu, kClip };
  Kind kind = kNone;
  float lo = 0.0f, hi = 0.0f;  // kClip's bounds

  ES_HD float Apply(float y) const {
    return kind == kRelu ? Relu(y) : kind == kClip ? Clip(y, lo, hi) : y;
  }
  ES_HD float Grad(float y, float dy) const {
    return kind == kRelu ? ReluGrad(Relu(y), dy) : kind == kClip ? ClipGrad(y, dy, lo, hi) : dy;
  }
};

// Whether dropout keeps an element, from one Philox word.
ES_HD bool DropoutKeeps(uint32_t bits, float p) { return UniformFromBits(bits) >= p; }

// Which of the four elements of one Philox block dropout keeps (its words,
// from `counter`, in element order): bit q for the block's element q.
ES_HD unsigned DropoutKeptBits(PhiloxKey key, uint64_t counter, float p) {
  uint32_t bits[4];
  Philox4x32(key, counter, 0, bits);
  return static_cast<unsigned>(DropoutKeeps(bits[0], p)) |
         static_cast<unsigned>(DropoutKeeps(bits[1], p)) << 1 |
         static_cast<unsigned>(DropoutKeeps(bits[2], p)) << 2 |
         static_cast<unsigned>(DropoutKeeps(bits[3], p)) << 3;
}

// What dropout multiplies an element and its gradient by: the kept element's
// scale (1 / (1 - p)), else 0.
ES_HD float DropoutScale(bool kept, float scale) { return kept ? scale : 0.0f; }

// One row of softmax cross-entropy: writes dz = (softmax - onehot) / rows and
// returns -log softmax[label] = log(sum) - (z[label] - max).
ES_HD float SoftmaxCrossEntropyRow(int classes, const float* z, int label, float inv_rows,
                                   float* dz) {
  float m = z[0];
  for (int c = 1; c < classes; ++c) m = z[c] > m ? z[c] : m;
  float sum = 0.0f;
  for (int c = 0; c < classes; ++c) {
    dz[c] = detmath::Exp(z[c] - m);
    sum += dz[c];
  }
  const float inv_sum = 1.0f / sum;
  const float loss = detmath::Log(sum) - (z[label] - m);
  for (int c = 0; c < classes; ++c) {
    const float prob = dz[c] * inv_sum;
    dz[c] = (prob - (c == label ? 1.0f : 0.0f)) * inv_rows;
  }
  return loss;
}

// The optimizers' update of one parameter value from its mean gradient g
// (optimizer.h): SGD with momentum and weight decay (state1: the velocity) or
// Adam with L2 weight decay (state1, state2: the two moments), as PyTorch
// defines them, in one fixed order of operations.
inline constexpr float kAdamBeta1 = 0.9f, kAdamBeta2 = 0.999f, kAdamEps = 1e-8f;
struct UpdateRule {
  bool adam = false;
  float lr = 0.0f;
  float momentum = 0.0f;  // SGD
  float weight_decay = 0.0f;
  float c1 = 1.0f, c2_sqrt = 1.0f;  // Adam's bias corrections at this step
  // Where > 0, each gradient is the mean of the step's fixed-point sums over
  // this many ESTs, decoded as the update reads it; else the part's grad.
  int mean_of = 0;
};

// One parameter's part of a step's update, in a backend's memory: its n
// fixed-point gradient sums (fixed_point.h) and mean gradients, and the n
// values with their state (state2: Adam's second moment, else null) that a
// rule updates from those means. Each call reads only the fields it names.
struct ParamPart {
  size_t n = 0;
  const int64_t* sums = nullptr;
  float* grad = nullptr;
  float* value = nullptr;
  float* state1 = nullptr;
  float* state2 = nullptr;
};

// The gradient the rule `r` reads for element i of part `p`.
ES_HD float StepGradient(const UpdateRule& r, const ParamPart& p, size_t i) {
  return r.mean_of > 0 ? FixedPointMean(p.sums[i], r.mean_of) : p.grad[i];
}

// g' = g + wd*w; v = momentum*v + g'; w = w - lr*v
ES_HD void SgdUpdate(const UpdateRule& r, float g, float* w, float* v) {
  const float gw = g + r.weight_decay * *w;
  *v = r.momentum * *v + gw;
  *w = *w - r.lr * *v;
}

ES_HD void AdamUpdate(const UpdateRule& r, float g, float* w, float* m, float* v) {
  const float gw = g + r.weight_decay * *w;
  *m = kAdamBeta1 * *m + (1.0f - kAdamBeta1) * gw;
  *v = kAdamBeta2 * *v + (1.0f - kAdamBeta2) * (gw * gw);
  const float denom = sqrtf(*v) / r.c2_sqrt + kAdamEps;
  *w = *w - (r.lr / r.c1) * (*m / denom);
}

}  // namespace easyscale::formulas
