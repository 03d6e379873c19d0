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
