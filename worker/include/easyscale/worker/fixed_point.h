// File: easyscale/worker/fixed_point.h
//
// Exact gradient aggregation. Each EST's fp32 gradient is rounded once to a
// 64-bit fixed-point value (2^-32 resolution); integer addition is associative,
// so the sum over ESTs is the same bits whatever the order, the worker count,
// the collective's algorithm or the device that ran the EST. The mean goes back
// to fp32 once, after the sum.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "easyscale/worker/detmath.h"

namespace easyscale {

inline constexpr int kFixedPointFractionBits = 32;

// The largest magnitude a value may take, in units of 2^-32: below 2^51 so the
// rounding trick below is exact, and below 2^62 / max_terms so a sum of
// max_terms values cannot overflow.
ES_HD double FixedPointLimit(int64_t max_terms) {
  const double by_terms = 4611686018427387904.0 / static_cast<double>(max_terms);
  return by_terms < 2251799813685248.0 ? by_terms : 2251799813685248.0;
}

// v * 2^32 rounded to nearest, ties to even, saturated at +-limit. Adding
// 1.5 * 2^52 puts the integer in the low mantissa bits (the FPU rounds there),
// so the conversion is plain arithmetic that vectorises and runs the same on
// every device. NaN gives garbage: callers flag it separately.
ES_HD int64_t FixedPointTerm(float v, double limit) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  double scaled = static_cast<double>(v) * 4294967296.0;
  scaled = scaled < -limit ? -limit : scaled;
  scaled = scaled > limit ? limit : scaled;
  const double shifted = scaled + kMagic;
  int64_t bits, base;
  memcpy(&bits, &shifted, sizeof bits);
  memcpy(&base, &kMagic, sizeof base);
  return bits - base;
}

// FixedPointTerm with the limit of `max_terms`; false for NaN or infinity.
ES_HD bool ToFixedPoint(float v, int64_t max_terms, int64_t* out) {
  if (!(v - v == 0.0f)) return false;
  *out = FixedPointTerm(v, FixedPointLimit(max_terms));
  return true;
}

// acc[i] += FixedPointTerm(g[i]) for a whole gradient; false if any is not finite.
inline bool AccumulateFixedPoint(const float* g, size_t n, int64_t max_terms, int64_t* acc) {
  const double limit = FixedPointLimit(max_terms);
  // Two branch-free passes so each vectorises: the finiteness flag (NaN
  // compares false, so it sets the flag), then the terms.
  int bad = 0;
  for (size_t i = 0; i < n; ++i)
    bad |= static_cast<int>(!(__builtin_fabsf(g[i]) <= 3.40282347e38f));
  for (size_t i = 0; i < n; ++i) acc[i] += FixedPointTerm(g[i], limit);
  return bad == 0;
}

// The mean of `terms` fixed-point values summed into `sum`, as fp32.
ES_HD float FixedPointMean(int64_t sum, int terms) {
  return static_cast<float>(static_cast<double>(sum) * (1.0 / 4294967296.0) /
                            static_cast<double>(terms));
}

// out[i] = FixedPointMean(sum[i], terms) for a whole gradient. Sums below 2^51
// in magnitude convert to double exactly through the same 1.5 * 2^52 trick
// (vectorised); larger ones take the scalar conversion, which is also exact.
inline void DecodeFixedPointMean(const int64_t* sum, size_t n, int terms, float* out) {
  const double magic = 6755399441055744.0;
  const int64_t base = __builtin_bit_cast(int64_t, magic);
  const int64_t small = int64_t{1} << 51;
  int large = 0;
  for (size_t i = 0; i < n; ++i) large |= static_cast<int>(sum[i] >= small || sum[i] <= -small);
  if (large != 0) {
    for (size_t i = 0; i < n; ++i) out[i] = FixedPointMean(sum[i], terms);
    return;
  }
  const double t = static_cast<double>(terms);
  for (size_t i = 0; i < n; ++i) {
    const double exact = __builtin_bit_cast(double, sum[i] + base) - magic;
    out[i] = static_cast<float>(exact * (1.0 / 4294967296.0) / t);
  }
}

}  // namespace easyscale
