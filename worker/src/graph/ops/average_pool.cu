// AveragePool's CUDA kernels: average_pool.cc's order, one thread per output
// (forward) and per input element (backward, gathering in output order).
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t AveragePoolForward(int planes, const cpu::ConvGeometry& g, const float* divisor,
                               const float* x, float* y, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEach(planes * per_plane, stream, [=] __device__(size_t o) {
    const float* img = x + o / per_plane * image;
    const size_t op = o % per_plane;
    const int oy = static_cast<int>(op / g.OW), ox = static_cast<int>(op % g.OW);
    float sum = 0.0f;
    for (int ky = 0; ky < g.KH; ++ky) {
      const int iy = oy * g.SH - g.PT + ky * g.DH;
      if (iy < 0 || iy >= g.H) continue;
      for (int kx = 0; kx < g.KW; ++kx) {
        const int ix = ox * g.SW - g.PL + kx * g.DW;
        if (ix >= 0 && ix < g.W) sum += img[iy * g.W + ix];
      }
    }
    y[o] = sum / divisor[op];
  });
}

cudaError_t AveragePoolBackward(int planes, const cpu::ConvGeometry& g, const float* divisor,
                                const float* dy, float* dx, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEach(planes * image, stream, [=] __device__(size_t e) {
    const size_t plane = e / image;
    const int idx = static_cast<int>(e % image), iy = idx / g.W, ix = idx % g.W;
    float sum = 0.0f;
    // Each output reads an input element through at most one tap.
    for (int oy = 0; oy < g.OH; ++oy) {
      const int ty = iy - (oy * g.SH - g.PT);
      if (ty < 0 || ty % g.DH != 0 || ty / g.DH >= g.KH) continue;
      for (int ox = 0; ox < g.OW; ++ox) {
        const int tx = ix - (ox * g.SW - g.PL);
        if (tx < 0 || tx % g.DW != 0 || tx / g.DW >= g.KW) continue;
        const size_t op = static_cast<size_t>(oy) * g.OW + ox;
        sum += dy[plane * per_plane + op] / divisor[op];
      }
    }
    dx[e] = sum;
  });
}

}  // namespace easyscale::graph::cuda_ops
