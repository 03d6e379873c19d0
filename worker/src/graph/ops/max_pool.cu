// MaxPool's CUDA kernels: max_pool.cc's order, one thread per output
// (forward) and per input element (backward, gathering in output order).
#include "graph/ops/cuda_ops.h"
#include "graph/ops/pool_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t MaxPoolForward(int planes, const cpu::ConvGeometry& g, const float* x, float* y,
                           int32_t* argmax, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEach(planes * per_plane, stream, [=] __device__(size_t o) {
    const float* img = x + o / per_plane * image;
    const int best =
        MaxPoolArgmax(g, img, static_cast<int>(o % per_plane / g.OW), static_cast<int>(o % g.OW));
    argmax[o] = best;
    y[o] = best >= 0 ? img[best] : -__int_as_float(0x7f800000);
  });
}

cudaError_t MaxPoolBackward(int planes, const cpu::ConvGeometry& g, const float* dy,
                            const int32_t* argmax, float* dx, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEach(planes * image, stream, [=] __device__(size_t e) {
    const size_t first = e / image * per_plane;
    const int idx = static_cast<int>(e % image);
    float sum = 0.0f;
    ForEachOutputReading(g, idx / g.W, idx % g.W, [&](int oy, int ox) {
      const size_t o = first + static_cast<size_t>(oy) * g.OW + ox;
      if (argmax[o] == idx) sum += dy[o];
    });
    dx[e] = sum;
  });
}

}  // namespace easyscale::graph::cuda_ops
