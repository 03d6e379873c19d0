// Conv's CUDA kernels for the GEMM route of conv.cc: the columns of a batch,
// their fold back into dX, and the channel-major <-> NCHW layouts.
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t ConvColumns(int B, int groups, int group, const cpu::ConvGeometry& g, const float* x,
                        float* cols, cudaStream_t stream) {
  const size_t P = static_cast<size_t>(g.OH) * g.OW, width = B * P;
  const size_t rows = static_cast<size_t>(g.C) * g.KH * g.KW;
  return cuda::LaunchForEach(rows * width, stream, [=] __device__(size_t e) {
    const size_t row = e / width, col = e % width, b = col / P, p = col % P;
    const int kx = static_cast<int>(row % g.KW), ky = static_cast<int>(row / g.KW % g.KH);
    const int c = static_cast<int>(row / (static_cast<size_t>(g.KW) * g.KH));
    const int iy = static_cast<int>(p / g.OW) * g.SH - g.PT + ky * g.DH;
    const int ix = static_cast<int>(p % g.OW) * g.SW - g.PL + kx * g.DW;
    const bool inside = iy >= 0 && iy < g.H && ix >= 0 && ix < g.W;
    const size_t plane = (b * groups + group) * g.C + c;
    cols[e] = inside ? x[(plane * g.H + iy) * g.W + ix] : 0.0f;
  });
}

cudaError_t ConvFoldColumns(int B, int groups, int group, const cpu::ConvGeometry& g,
                            const float* cols, float* dx, cudaStream_t stream) {
  const size_t P = static_cast<size_t>(g.OH) * g.OW, width = B * P;
  const size_t image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEach(B * g.C * image, stream, [=] __device__(size_t e) {
    const size_t b = e / (g.C * image);
    const int c = static_cast<int>(e / image % g.C);
    const int iy = static_cast<int>(e % image / g.W), ix = static_cast<int>(e % g.W);
    // Each tap reads this element from at most one output position: taps in
    // (ky, kx) order, the sum from 0.
    float sum = 0.0f;
    for (int ky = 0; ky < g.KH; ++ky) {
      const int ty = iy + g.PT - ky * g.DH;
      if (ty < 0 || ty % g.SH != 0 || ty / g.SH >= g.OH) continue;
      for (int kx = 0; kx < g.KW; ++kx) {
        const int tx = ix + g.PL - kx * g.DW;
        if (tx < 0 || tx % g.SW != 0 || tx / g.SW >= g.OW) continue;
        const size_t row = (static_cast<size_t>(c) * g.KH + ky) * g.KW + kx;
        sum += cols[row * width + b * P + static_cast<size_t>(ty / g.SH) * g.OW + tx / g.SW];
      }
    }
    dx[((b * groups + group) * g.C + c) * image + e % image] = sum;
  });
}

cudaError_t FillRows(int rows, size_t cols, const float* per_row, float* cm, cudaStream_t stream) {
  return cuda::LaunchForEach(rows * cols, stream, [=] __device__(size_t e) {
    cm[e] = per_row != nullptr ? per_row[e / cols] : 0.0f;
  });
}

cudaError_t GroupLayout(int B, int total, int group, int M, int P, bool to_nchw, const float* src,
                        float* dst, cudaStream_t stream) {
  const size_t width = static_cast<size_t>(B) * P;
  return cuda::LaunchForEach(M * width, stream, [=] __device__(size_t e) {
    const size_t m = e / width, b = e % width / P, p = e % P;
    const size_t nchw = (b * total + static_cast<size_t>(group) * M + m) * P + p;
    if (to_nchw) {
      dst[nchw] = src[e];
    } else {
      dst[e] = src[nchw];
    }
  });
}

}  // namespace easyscale::graph::cuda_ops
