// File: worker/src/graph/ops/row_formulas.h
//
// The per-row formulas of Softmax/LogSoftmax (softmax.cc) and
// LayerNormalization (layer_normalization.cc), for their CPU kernels and
// their CUDA twins: one definition, so both run the same operations in the
// same order (the op files document it).
#pragma once

#include <cstdint>

#include "easyscale/worker/detmath.h"
#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/elementwise_formulas.h"

namespace easyscale::graph {

// Mul+Softmax's scale (softmax.cc): where given, each x is multiplied by it
// before a row's formulas and each dx after them, as the Mul did.
struct SoftmaxScale {
  bool given = false;
  float value = 1.0f;

  ES_HD float Input(float x) const { return given ? MulFormula::Apply(x, value) : x; }
  ES_HD float Gradient(float dx) const {
    return given ? MulFormula::GradA(0.0f, value, 0.0f, dx) : dx;
  }
};

// A softmax row's parts, shared by the whole-row functions below and the
// CUDA kernels that fold rows a chunk at a time: the max's step (a NaN is
// kept only where it comes first), an element's exponential given the row's
// max m, log-softmax's output given log_s = Log(sum of the exponentials), the
// gradient's sum term and its output given that sum t. Softmax's output is
// the exponential divided by the sum.
ES_HD float SoftmaxMaxStep(float m, float x) { return x > m ? x : m; }
ES_HD float SoftmaxExp(float x, float m) { return detmath::Exp(x - m); }
ES_HD float LogSoftmaxOutput(float x, float m, float log_s) { return (x - m) - log_s; }
ES_HD float SoftmaxGradTerm(float y, float dy, bool log) { return log ? dy : dy * y; }
ES_HD float SoftmaxGradOutput(float y, float dy, float t, bool log) {
  return log ? dy - detmath::Exp(y) * t : y * (dy - t);
}

// One softmax row of n elements `stride` apart: y = softmax(x), or
// log-softmax when `log`. In place (y == x) too.
ES_HD void SoftmaxRow(const float* x, float* y, int64_t n, int64_t stride, bool log) {
  float m = x[0];
  for (int64_t j = 1; j < n; ++j) m = SoftmaxMaxStep(m, x[j * stride]);
  float s = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const float e = SoftmaxExp(x[j * stride], m);
    if (!log) y[j * stride] = e;
    s += e;
  }
  if (log) {
    const float log_s = detmath::Log(s);
    for (int64_t j = 0; j < n; ++j) y[j * stride] = LogSoftmaxOutput(x[j * stride], m, log_s);
  } else {
    for (int64_t j = 0; j < n; ++j) y[j * stride] = y[j * stride] / s;
  }
}

// The gradient of one softmax row from its output y and dy.
ES_HD void SoftmaxRowGradient(const float* y, const float* dy, float* dx, int64_t n, int64_t stride,
                              bool log) {
  float t = 0.0f;
  for (int64_t j = 0; j < n; ++j) t += SoftmaxGradTerm(y[j * stride], dy[j * stride], log);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t k = j * stride;
    dx[k] = SoftmaxGradOutput(y[k], dy[k], t, log);
  }
}

// A layer-norm row's mean and 1 / sqrt(var + epsilon), n contiguous elements.
ES_HD void LayerNormRowStats(const float* xr, int64_t n, float epsilon, float* mean,
                             float* invstd) {
  const float count = static_cast<float>(n);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += xr[j];
  const float m = sum / count;
  float sum_sq = 0.0f;
  for (int64_t j = 0; j < n; ++j) formulas::FoldSquaredDeviation(xr[j], m, &sum_sq);
  *mean = m;
  *invstd = formulas::InvStd(sum_sq / count, epsilon);
}

// One layer-norm output: xhat * scale + bias (scale 1 and bias 0 when absent).
ES_HD float LayerNormOutput(float x, float mean, float invstd, const float* scale,
                            const float* bias, int64_t j) {
  const float xhat = (x - mean) * invstd;
  return xhat * (scale ? scale[j] : 1.0f) + (bias ? bias[j] : 0.0f);
}

}  // namespace easyscale::graph
