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

#include "easyscale/worker/detmath.h"

namespace easyscale {

inline constexpr int kFixedPointFractionBits = 32;

// Rounds v * 2^32 to nearest (ties to even), saturating at +-2^62 / max_terms
// so that a sum of max_terms values cannot overflow. Returns false for NaN/inf.
ES_HD bool ToFixedPoint(float v, int64_t max_terms, int64_t* out) {
  if (!(v - v == 0.0f)) return false;  // NaN or infinity
  const double scaled = static_cast<double>(v) * 4294967296.0;
  const double limit = 4611686018427387904.0 / static_cast<double>(max_terms);
  const double clamped = scaled > limit ? limit : (scaled < -limit ? -limit : scaled);
#if defined(__CUDA_ARCH__)
  *out = __double2ll_rn(clamped);
#else
  *out = std::llrint(clamped);
#endif
  return true;
}

// The mean of `terms` fixed-point values summed into `sum`, as fp32.
ES_HD float FixedPointMean(int64_t sum, int terms) {
  return static_cast<float>(static_cast<double>(sum) * (1.0 / 4294967296.0) /
                            static_cast<double>(terms));
}

}  // namespace easyscale
