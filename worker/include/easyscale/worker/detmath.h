// File: easyscale/worker/detmath.h
//
// The project's own transcendental functions, built only from IEEE-754 basic
// operations (+, -, *, /, sqrt, fma), each correctly rounded on every CPU and
// GPU. libm's and CUDA's expf/logf differ in the last bit on many inputs; these
// give the same bits everywhere, so a CPU worker and a GPU worker agree.
// Compiled as host code and, under nvcc, as device code too.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ES_HD __host__ __device__ __forceinline__
#else
#define ES_HD inline
#endif

namespace easyscale::detmath {

ES_HD float BitsToFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
ES_HD uint32_t FloatToBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

#if defined(__CUDA_ARCH__)
ES_HD float Fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
ES_HD double Fma(double a, double b, double c) { return __fma_rn(a, b, c); }
#else
ES_HD float Fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
ES_HD double Fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
#endif

// exp(x) for float: x = n*ln2 + r, |r| <= ln2/2, degree-7 polynomial in r
// (Horner with fma), then scaled by 2^n through the exponent bits.
ES_HD float Exp(float x) {
  if (x != x) return x;
  if (x > 88.72283f) return BitsToFloat(0x7f800000u);
  if (x < -103.97208f) return 0.0f;
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693145751953125f;  // exact in 16 bits
  const float kLn2Lo = 1.428606765330187045e-06f;
  float t = x * kLog2e;
  // Round to nearest integer without relying on rint's mode: add/subtract 1.5*2^23.
  const float kShift = 12582912.0f;
  float n = (t + kShift) - kShift;
  float r = Fma(-n, kLn2Hi, x);
  r = Fma(-n, kLn2Lo, r);
  float p = 1.98412698e-4f;       // 1/5040
  p = Fma(p, r, 1.38888889e-3f);  // 1/720
  p = Fma(p, r, 8.33333333e-3f);  // 1/120
  p = Fma(p, r, 4.16666667e-2f);  // 1/24
  p = Fma(p, r, 1.66666667e-1f);  // 1/6
  p = Fma(p, r, 0.5f);
  p = Fma(p, r, 1.0f);
  p = Fma(p, r, 1.0f);
  int ni = static_cast<int>(n);
  // Split the scale in two so 2^n never overflows or underflows on its own.
  int n1 = ni / 2;
  int n2 = ni - n1;
  float s1 = BitsToFloat(static_cast<uint32_t>(n1 + 127) << 23);
  float s2 = BitsToFloat(static_cast<uint32_t>(n2 + 127) << 23);
  return (p * s1) * s2;
}

// log(x) for float: x = m * 2^e with m in [sqrt(1/2), sqrt(2)),
// log(m) = 2*atanh(s), s = (m-1)/(m+1), odd series in s to s^11.
ES_HD float Log(float x) {
  if (x != x || x < 0.0f) return BitsToFloat(0x7fc00000u);
  if (x == 0.0f) return BitsToFloat(0xff800000u);
  if (x == BitsToFloat(0x7f800000u)) return x;
  int e = 0;
  if (x < 1.17549435e-38f) {  // subnormal: scale into the normal range first
    x = x * 16777216.0f;      // 2^24
    e = -24;
  }
  uint32_t u = FloatToBits(x);
  e += static_cast<int>((u >> 23) & 0xffu) - 127;
  float m = BitsToFloat((u & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  if (m > 1.41421356f) {
    m = m * 0.5f;
    e += 1;
  }
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  float p = 0.0909090909f;       // 1/11
  p = Fma(p, s2, 0.111111111f);  // 1/9
  p = Fma(p, s2, 0.142857143f);  // 1/7
  p = Fma(p, s2, 0.2f);
  p = Fma(p, s2, 0.333333333f);
  p = Fma(p, s2, 1.0f);
  const float log_m = 2.0f * s * p;
  const float kLn2Hi = 0.693145751953125f;
  const float kLn2Lo = 1.428606765330187045e-06f;
  const float fe = static_cast<float>(e);
  return Fma(fe, kLn2Hi, Fma(fe, kLn2Lo, log_m));
}

// erf(x) for float, odd: |x| < 1: x * P(x^2), P of degree 8; 1 <= |x| < 3.92:
// 1 - exp(-x^2) * Q(|x| - 2.5), Q of degree 12 fitted to erfcx = erfc(x) exp(x^2),
// with x^2 split exactly (fma) so exp's argument carries no rounding error;
// beyond, erf rounds to +-1. Coefficients: weighted least-squares fits of
// erf(x)/x and erfcx in double, rounded to float. Within 2 ulp of erf.
ES_HD float Erf(float x) {
  if (x != x) return x;
  const float a = BitsToFloat(FloatToBits(x) & 0x7fffffffu);  // |x|, +0 for -0
  float r;
  if (a < 1.0f) {
    const float t = a * a;
    float p = 1.05570575e-06f;
    p = Fma(p, t, -1.38963132e-05f);
    p = Fma(p, t, 0.000119544267f);
    p = Fma(p, t, -0.000854245562f);
    p = Fma(p, t, 0.00522377482f);
    p = Fma(p, t, -0.0268661305f);
    p = Fma(p, t, 0.112837911f);
    p = Fma(p, t, -0.376126379f);
    p = Fma(p, t, 1.12837923f);
    r = a * p;
  } else if (a < 3.92f) {
    const float s = a - 2.5f;
    float q = 1.05672861e-07f;
    q = Fma(q, s, -4.18467465e-07f);
    q = Fma(q, s, 9.63715934e-07f);
    q = Fma(q, s, -3.79154676e-06f);
    q = Fma(q, s, 1.61343469e-05f);
    q = Fma(q, s, -5.94345292e-05f);
    q = Fma(q, s, 0.000210906452f);
    q = Fma(q, s, -0.000733230147f);
    q = Fma(q, s, 0.00246706628f);
    q = Fma(q, s, -0.00800166652f);
    q = Fma(q, s, 0.0249379948f);
    q = Fma(q, s, -0.0743473396f);
    q = Fma(q, s, 0.21080637f);
    const float hi = a * a;
    const float lo = Fma(a, a, -hi);  // a^2 = hi + lo exactly
    float e = Exp(-hi);
    e = Fma(-e, lo, e);  // exp(-hi - lo) to first order in lo
    r = 1.0f - e * q;
  } else {
    r = 1.0f;
  }
  return (FloatToBits(x) >> 31) != 0u ? -r : r;  // odd, -0 included
}

// tanh(x) for float, odd: |x| < 0.55: x + x^3 * P(x^2), P of degree 6 (a
// weighted least-squares fit of (tanh(x)/x - 1)/x^2); beyond: (1 - e) / (1 + e)
// with e = exp(-2|x|), which tends to 1 without overflow. Within 2 ulp of tanh.
ES_HD float Tanh(float x) {
  if (x != x) return x;
  const float a = BitsToFloat(FloatToBits(x) & 0x7fffffffu);  // |x|, +0 for -0
  float r;
  if (a < 0.55f) {
    const float t = a * a;
    float p = -0.000989240245f;
    p = Fma(p, t, 0.00342818792f);
    p = Fma(p, t, -0.00883506797f);
    p = Fma(p, t, 0.0218672864f);
    p = Fma(p, t, -0.0539682098f);
    p = Fma(p, t, 0.13333334f);
    p = Fma(p, t, -0.333333343f);
    r = Fma(a * t, p, a);
  } else {
    const float e = Exp(-2.0f * a);
    r = (1.0f - e) / (1.0f + e);
  }
  return (FloatToBits(x) >> 31) != 0u ? -r : r;  // odd, -0 included
}

// 1 / (1 + exp(-x)) for float, from exp of -|x| only (never overflows): x >= 0:
// 1 / (1 + e); x < 0: e / (1 + e), which keeps tiny results' precision.
ES_HD float Sigmoid(float x) {
  if (x != x) return x;
  if (x >= 0.0f) return 1.0f / (1.0f + Exp(-x));
  const float e = Exp(x);
  return e / (1.0f + e);
}

// x^y for float as exp(y * log|x|), with IEEE pow's special cases (y == 0 or
// x == 1: 1; zero and infinite x or y; a negative x with an integer y takes
// y's parity as its sign, with another y it is NaN) and two exact ones: y == 1
// gives x and y == 2 gives x * x, so squares (variance, GELU's tanh form) are
// exact. Otherwise the error grows with |y log x|: within (4 + 2 |y log x|) ulp.
ES_HD float Pow(float x, float y) {
  const float kInf = BitsToFloat(0x7f800000u);
  if (y == 0.0f || x == 1.0f) return 1.0f;
  if (x != x || y != y) return x + y;
  if (y == 1.0f) return x;
  if (y == 2.0f) return x * x;
  // Whether y is an odd integer: |y| >= 2^24 is always an even integer.
  const float ay = y < 0.0f ? -y : y;
  bool integer = ay >= 16777216.0f;
  bool odd = false;
  if (!integer) {
    const float kShift = 12582912.0f;  // 1.5 * 2^23: rounds |y| < 2^23 to an integer
    const float n = ay < 8388608.0f ? (ay + kShift) - kShift : ay;
    integer = n == ay;
    odd = integer && static_cast<int64_t>(n) % 2 != 0;
  }
  const bool negative = x < 0.0f || (x == 0.0f && FloatToBits(x) != 0u);
  const float ax = negative ? -x : x;
  const float sign = negative && odd ? -1.0f : 1.0f;
  if (ax == 0.0f) return y > 0.0f ? sign * 0.0f : sign * kInf;
  if (ax == kInf) return y > 0.0f ? sign * kInf : sign * 0.0f;
  if (negative && !integer) return BitsToFloat(0x7fc00000u);
  if (ax == 1.0f) return 1.0f;  // (-1)^(+-inf)
  return sign * Exp(y * Log(ax));
}

// cos(x) in double for host-side schedules (the learning rate), from a Taylor
// series after reduction to [0, pi/2]; same bits on every machine.
inline double Cos(double x) {
  const double kPi = 3.14159265358979323846;
  if (x < 0) x = -x;
  const double two_pi = 2.0 * kPi;
  const double k = static_cast<double>(static_cast<int64_t>(x / two_pi));
  x = x - k * two_pi;
  if (x > kPi) x = two_pi - x;  // cos is even about pi
  double sign = 1.0;
  if (x > kPi / 2) {
    x = kPi - x;
    sign = -1.0;
  }
  const double x2 = x * x;
  double term = 1.0;
  double sum = 1.0;
  for (int i = 1; i <= 12; ++i) {
    term = -term * x2 / static_cast<double>((2 * i - 1) * (2 * i));
    sum = sum + term;
  }
  return sign * sum;
}

}  // namespace easyscale::detmath
