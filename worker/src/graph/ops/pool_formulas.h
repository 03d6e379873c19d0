// File: worker/src/graph/ops/pool_formulas.h
//
// The pools' per-output formulas over one image, for their CPU kernels
// (max_pool.cc, average_pool.cc) and their CUDA twins (the .cu files beside
// them): one definition, so both run the same comparisons and additions in
// the same order. Taps run in (ky, kx) order; taps in the padding are skipped.
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

// The first output index whose window, of `taps` taps `dilation` apart and
// `stride` apart from -pad, can reach input index i: windows before it end
// before i.
ES_HD int FirstWindowReaching(int i, int pad, int taps, int dilation, int stride) {
  const int reach = i + pad - (taps - 1) * dilation;
  return reach <= 0 ? 0 : (reach + stride - 1) / stride;
}

// Calls f(oy, ox) for every output whose window reads input (iy, ix), in
// row-major output order: the order the backward passes add their
// contributions to that element in (each output reads it through at most one
// tap). Only the outputs whose windows can reach it are visited.
template <typename F>
ES_HD void ForEachOutputReading(const cpu::ConvGeometry& g, int iy, int ix, F f) {
  const int oy_end = (iy + g.PT) / g.SH + 1 < g.OH ? (iy + g.PT) / g.SH + 1 : g.OH;
  const int ox_end = (ix + g.PL) / g.SW + 1 < g.OW ? (ix + g.PL) / g.SW + 1 : g.OW;
  for (int oy = FirstWindowReaching(iy, g.PT, g.KH, g.DH, g.SH); oy < oy_end; ++oy) {
    const int ty = iy - (oy * g.SH - g.PT);
    if (ty < 0 || ty % g.DH != 0 || ty / g.DH >= g.KH) continue;
    for (int ox = FirstWindowReaching(ix, g.PL, g.KW, g.DW, g.SW); ox < ox_end; ++ox) {
      const int tx = ix - (ox * g.SW - g.PL);
      if (tx < 0 || tx % g.DW != 0 || tx / g.DW >= g.KW) continue;
      f(oy, ox);
    }
  }
}

}  // namespace easyscale::graph
