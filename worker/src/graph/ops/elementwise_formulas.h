// File: worker/src/graph/ops/elementwise_formulas.h
//
// The per-element formulas of the element-wise ops, one struct per op, for
// binary_elementwise.h and unary_elementwise.h (see there for the members)
// and, as ES_HD functions, for CUDA twins, so both devices evaluate the same
// operations in the same order. The int64 forms are host-only.
#pragma once

#include <cmath>
#include <cstdint>

#include "easyscale/worker/detmath.h"
#include "easyscale/worker/kernel_formulas.h"

namespace easyscale::graph {

// What a binary formula's gradient rule for A (kGradAReads) or for B
// (kGradBReads) reads: a mask of these.
inline constexpr int kReadsA = 1, kReadsB = 2, kReadsY = 4;
// Which operands' gradient terms are dy itself (kGradIsDy): a mask of these.
inline constexpr int kDyA = 1, kDyB = 2;

struct AddFormula {
  static constexpr bool kInt64 = true;
  static constexpr int kGradAReads = 0, kGradBReads = 0;
  static constexpr bool kMixed = false;
  static constexpr bool kGradB = true;
  static constexpr int kGradIsDy = kDyA | kDyB;
  ES_HD static float Apply(float a, float b) { return a + b; }
  // Two's complement wrap-around rather than undefined overflow.
  static int64_t ApplyInt(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  }
  ES_HD static float GradA(float, float, float, float dy) { return dy; }
  ES_HD static float GradB(float, float, float, float dy) { return dy; }
};

struct SubFormula {
  static constexpr bool kInt64 = true;
  static constexpr int kGradAReads = 0, kGradBReads = 0;
  static constexpr bool kMixed = false;
  static constexpr bool kGradB = true;
  static constexpr int kGradIsDy = kDyA;
  ES_HD static float Apply(float a, float b) { return a - b; }
  // Two's complement wrap-around rather than undefined overflow.
  static int64_t ApplyInt(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  }
  ES_HD static float GradA(float, float, float, float dy) { return dy; }
  ES_HD static float GradB(float, float, float, float dy) { return -dy; }
};

struct MulFormula {
  static constexpr bool kInt64 = true;
  static constexpr int kGradAReads = kReadsB, kGradBReads = kReadsA;
  static constexpr bool kMixed = false;
  static constexpr bool kGradB = true;
  static constexpr int kGradIsDy = 0;
  ES_HD static float Apply(float a, float b) { return a * b; }
  // Two's complement wrap-around rather than undefined overflow.
  static int64_t ApplyInt(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  }
  ES_HD static float GradA(float, float b, float, float dy) { return dy * b; }
  ES_HD static float GradB(float a, float, float, float dy) { return dy * a; }
};

struct DivFormula {
  static constexpr bool kInt64 = true;
  static constexpr int kGradAReads = kReadsB, kGradBReads = kReadsB | kReadsY;
  static constexpr bool kMixed = false;
  static constexpr bool kGradB = true;
  static constexpr int kGradIsDy = 0;
  ES_HD static float Apply(float a, float b) { return a / b; }
  static int64_t ApplyInt(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));  // no INT64_MIN trap
    return a / b;
  }
  ES_HD static float GradA(float, float b, float, float dy) { return dy / b; }
  ES_HD static float GradB(float, float b, float y, float dy) { return -dy * (y / b); }
};

struct PowFormula {
  static constexpr bool kInt64 = true;
  static constexpr int kGradAReads = kReadsA | kReadsB, kGradBReads = 0;
  static constexpr bool kMixed = true;
  static constexpr bool kGradB = false;
  static constexpr int kGradIsDy = 0;
  ES_HD static float Apply(float a, float b) { return detmath::Pow(a, b); }
  static int64_t ApplyInt(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 != 0 ? -1 : 1) : 0;
    uint64_t result = 1, base = static_cast<uint64_t>(a);
    for (uint64_t e = static_cast<uint64_t>(b); e != 0; e >>= 1) {
      if (e & 1) result *= base;
      base *= base;
    }
    return static_cast<int64_t>(result);
  }
  static int64_t ApplyIntFloat(int64_t a, float b) {
    const float kLimit = 9.2e18f;  // below 2^63
    if (b > -kLimit && b < kLimit && b == static_cast<float>(static_cast<int64_t>(b))) {
      return ApplyInt(a, static_cast<int64_t>(b));
    }
    const float p = detmath::Pow(static_cast<float>(a), b);
    return p > -kLimit && p < kLimit ? static_cast<int64_t>(p) : 0;
  }
  ES_HD static float GradA(float a, float b, float, float dy) {
    return dy * (b * detmath::Pow(a, b - 1.0f));
  }
};

struct ReluFormula {
  static constexpr bool kGradReadsX = false, kGradReadsY = true;
  ES_HD static float Apply(float x) { return formulas::Relu(x); }
  // Y > 0 exactly where X > 0 (NaN and -0 stay themselves), so the rule
  // reads Y and X's memory can go once the forward pass is done with it.
  ES_HD static float Grad(float, float y, float dy) { return formulas::ReluGrad(y, dy); }
};

struct SqrtFormula {
  static constexpr bool kGradReadsX = false, kGradReadsY = true;
  ES_HD static float Apply(float x) { return sqrtf(x); }
  ES_HD static float Grad(float, float y, float dy) { return dy / (2.0f * y); }
};

struct ErfFormula {
  static constexpr bool kGradReadsX = true, kGradReadsY = false;
  ES_HD static float Apply(float x) { return detmath::Erf(x); }
  ES_HD static float Grad(float x, float, float dy) {
    const float kTwoOverSqrtPi = 1.12837916709551257f;
    return dy * (kTwoOverSqrtPi * detmath::Exp(-(x * x)));
  }
};

// GELU as PyTorch exports it below opset 20 (Div by float(sqrt 2), Erf, Add
// 1, Mul by X, Mul by 0.5): the chain's own operations in its order, and a
// gradient that repeats the unfused rules step by step — each binary op's
// one-term sum from +0 (broadcast.h) and the runtime's sum of X's two
// contributions (Div's, then Mul's) included — so the bits are the chain's.
struct GeluFormula {
  static constexpr bool kGradReadsX = true, kGradReadsY = false;
  static constexpr float kSqrt2 = 1.41421353816986083984375f;  // float(sqrt 2), PyTorch's
  ES_HD static float Apply(float x) {
    const float t3 = AddFormula::Apply(ErfFormula::Apply(DivFormula::Apply(x, kSqrt2)), 1.0f);
    return MulFormula::Apply(MulFormula::Apply(x, t3), 0.5f);
  }
  ES_HD static float Grad(float x, float, float dy) {
    const float t1 = DivFormula::Apply(x, kSqrt2);
    const float t3 = AddFormula::Apply(ErfFormula::Apply(t1), 1.0f);
    const float dt4 = 0.0f + MulFormula::GradA(0.0f, 0.5f, 0.0f, dy);  // Mul(t4, 0.5)
    const float dx_mul = 0.0f + MulFormula::GradA(x, t3, 0.0f, dt4);   // Mul(X, t3)
    const float dt3 = 0.0f + MulFormula::GradB(x, t3, 0.0f, dt4);
    const float dt2 = 0.0f + AddFormula::GradA(0.0f, 1.0f, 0.0f, dt3);  // Add(t2, 1)
    const float dt1 = ErfFormula::Grad(t1, 0.0f, dt2);
    const float dx_div = 0.0f + DivFormula::GradA(x, kSqrt2, 0.0f, dt1);  // Div(X, sqrt 2)
    return dx_div + dx_mul;
  }
};

struct TanhFormula {
  static constexpr bool kGradReadsX = false, kGradReadsY = true;
  ES_HD static float Apply(float x) { return detmath::Tanh(x); }
  ES_HD static float Grad(float, float y, float dy) { return dy * (1.0f - y * y); }
};

struct SigmoidFormula {
  static constexpr bool kGradReadsX = false, kGradReadsY = true;
  ES_HD static float Apply(float x) { return detmath::Sigmoid(x); }
  ES_HD static float Grad(float, float y, float dy) { return dy * ((1.0f - y) * y); }
};

// A unary op's gradient at element i, reading only what F's rule reads (the
// runtime may have reused the others' memory: Op::BackwardReadsInput).
template <typename F>
ES_HD float UnaryGrad(const float* x, const float* y, const float* dy, int64_t i) {
  return F::Grad(F::kGradReadsX ? x[i] : 0.0f, F::kGradReadsY ? y[i] : 0.0f, dy[i]);
}

// Operand `operand`'s gradient term from output o (a's element ia, b's ib),
// reading only what that operand's rule reads (the runtime may have reused
// the others' memory: Op::SetWantedGradients).
template <typename F>
ES_HD float BinaryGradTerm(int operand, const float* a, const float* b, const float* y,
                           const float* dy, int64_t ia, int64_t ib, int64_t o) {
  const int reads = operand == 0 ? F::kGradAReads : F::kGradBReads;
  const float av = (reads & kReadsA) != 0 ? a[ia] : 0.0f;
  const float bv = (reads & kReadsB) != 0 ? b[ib] : 0.0f;
  const float yv = (reads & kReadsY) != 0 ? y[o] : 0.0f;
  if constexpr (F::kGradB) {
    if (operand == 1) return F::GradB(av, bv, yv, dy[o]);
  }
  return F::GradA(av, bv, yv, dy[o]);
}

}  // namespace easyscale::graph
