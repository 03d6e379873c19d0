// File: worker/src/graph/ops/pool_formulas.h
//
// The pools' per-output formulas over one image, for their CPU kernels
// (max_pool.cc, average_pool.cc) and their CUDA twins (the .cu files beside
// them): one definition, so both run the same comparisons and additions in
// the same order. Taps run in (ky, kx) order; taps in the padding are skipped.
// The window arithmetic (which output a tap reads an input element from) is
// the depthwise convolution's too (conv.cu).
#pragma once

#include "easyscale/worker/cpu_kernels.h"
#include "easyscale/worker/detmath.h"

namespace easyscale::graph {

// The index in the image of output (oy, ox)'s first largest tap (a later tap
// wins only when strictly greater), or -1 when no tap is in the image.
ES_HD int MaxPoolArgmax(const cpu::ConvGeometry& g, const float* img, int oy, int ox) {
  int best = -1;
  for (int ky = 0; ky < g.KH; ++ky) {
    const int iy = oy * g.SH - g.PT + ky * g.DH;
    if (iy < 0 || iy >= g.H) continue;
    for (int kx = 0; kx < g.KW; ++kx) {
      const int ix = ox * g.SW - g.PL + kx * g.DW;
      if (ix < 0 || ix >= g.W) continue;
      const int idx = iy * g.W + ix;
      if (best < 0 || img[idx] > img[best]) best = idx;
    }
  }
  return best;
}

// The sum from 0 of output (oy, ox)'s in-image taps.
ES_HD float AveragePoolSum(const cpu::ConvGeometry& g, const float* img, int oy, int ox) {
  float sum = 0.0f;
  for (int ky = 0; ky < g.KH; ++ky) {
    const int iy = oy * g.SH - g.PT + ky * g.DH;
    if (iy < 0 || iy >= g.H) continue;
    for (int kx = 0; kx < g.KW; ++kx) {
      const int ix = ox * g.SW - g.PL + kx * g.DW;
      if (ix >= 0 && ix < g.W) sum += img[iy * g.W + ix];
    }
  }
  return sum;
}

// t / s for t >= 0; strides and dilations of 1 and 2 (every example model's)
// without an integer division.
ES_HD int QuotientOf(int t, int s) { return s == 1 ? t : s == 2 ? t >> 1 : t / s; }

// t / s where t >= 0 and s divides it, else -1 (which output row or column a
// tap reads an input element from).
ES_HD int StrideQuotient(int t, int s) {
  if (t < 0) return -1;
  const int q = QuotientOf(t, s);
  return q * s == t ? q : -1;
}

// The first output index whose window, of `taps` taps `dilation` apart and
// `stride` apart from -pad, can reach input index i: windows before it end
// before i.
ES_HD int FirstWindowReaching(int i, int pad, int taps, int dilation, int stride) {
  const int reach = i + pad - (taps - 1) * dilation;
  return reach <= 0 ? 0 : QuotientOf(reach + stride - 1, stride);
}

// Calls f(oy, ox) for every output whose window reads input (iy, ix), in
// row-major output order: the order the backward passes add their
// contributions to that element in (each output reads it through at most one
// tap). Only the outputs whose windows can reach it are visited.
template <typename F>
ES_HD void ForEachOutputReading(const cpu::ConvGeometry& g, int iy, int ix, F f) {
  const int last_oy = QuotientOf(iy + g.PT, g.SH), last_ox = QuotientOf(ix + g.PL, g.SW);
  const int oy_end = last_oy + 1 < g.OH ? last_oy + 1 : g.OH;
  const int ox_end = last_ox + 1 < g.OW ? last_ox + 1 : g.OW;
  for (int oy = FirstWindowReaching(iy, g.PT, g.KH, g.DH, g.SH); oy < oy_end; ++oy) {
    const int ky = StrideQuotient(iy - (oy * g.SH - g.PT), g.DH);
    if (ky < 0 || ky >= g.KH) continue;
    for (int ox = FirstWindowReaching(ix, g.PL, g.KW, g.DW, g.SW); ox < ox_end; ++ox) {
      const int kx = StrideQuotient(ix - (ox * g.SW - g.PL), g.DW);
      if (kx < 0 || kx >= g.KW) continue;
      f(oy, ox);
    }
  }
}

}  // namespace easyscale::graph
