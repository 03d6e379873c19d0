// MaxPool's CUDA kernels: max_pool.cc's order, one thread per output
// (forward) and per input element (backward, gathering in output order).
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t MaxPoolForward(int planes, const cpu::ConvGeometry& g, const float* x, float* y,
                           int32_t* argmax, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEach(planes * per_plane, stream, [=] __device__(size_t o) {
    const float* img = x + o / per_plane * image;
    const int oy = static_cast<int>(o % per_plane / g.OW), ox = static_cast<int>(o % g.OW);
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
    argmax[o] = best;
    y[o] = best >= 0 ? img[best] : -__int_as_float(0x7f800000);
  });
}

cudaError_t MaxPoolBackward(int planes, const cpu::ConvGeometry& g, const float* dy,
                            const int32_t* argmax, float* dx, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEach(planes * image, stream, [=] __device__(size_t e) {
    const size_t plane = e / image;
    const int idx = static_cast<int>(e % image), iy = idx / g.W, ix = idx % g.W;
    float sum = 0.0f;
    // The outputs whose window may hold (iy, ix), in row-major order.
    for (int oy = 0; oy < g.OH; ++oy) {
      const int top = oy * g.SH - g.PT;
      if (iy < top || iy > top + (g.KH - 1) * g.DH) continue;
      for (int ox = 0; ox < g.OW; ++ox) {
        const int left = ox * g.SW - g.PL;
        if (ix < left || ix > left + (g.KW - 1) * g.DW) continue;
        const size_t o = plane * per_plane + static_cast<size_t>(oy) * g.OW + ox;
        if (argmax[o] == idx) sum += dy[o];
      }
    }
    dx[e] = sum;
  });
}

}  // namespace easyscale::graph::cuda_ops
