// MaxPool's CUDA kernels: max_pool.cc's order, one thread per output
// (forward) and per input element (backward, gathering in output order),
// each with its plane and position from LaunchForEachInChannels.
#include "graph/ops/cuda_ops.h"
#include "graph/ops/pool_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t MaxPoolForward(int planes, const cpu::ConvGeometry& g, const float* x, float* y,
                           int32_t* argmax, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEachInChannels(
      1, planes, per_plane, stream, [=] __device__(size_t o, unsigned, unsigned op, size_t plane) {
        const float* img = x + plane * image;
        const int oy = static_cast<int>(op) / g.OW;
        const int best = MaxPoolArgmax(g, img, oy, static_cast<int>(op) - oy * g.OW);
        argmax[o] = best;
        y[o] = best >= 0 ? img[best] : -__int_as_float(0x7f800000);
      });
}

cudaError_t MaxPoolBackward(int planes, const cpu::ConvGeometry& g, const float* dy,
                            const int32_t* argmax, float* dx, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEachInChannels(
      1, planes, image, stream, [=] __device__(size_t e, unsigned, unsigned idx, size_t plane) {
        const size_t first = plane * per_plane;
        const int iy = static_cast<int>(idx) / g.W;
        float sum = 0.0f;
        ForEachOutputReading(g, iy, static_cast<int>(idx) - iy * g.W, [&](int oy, int ox) {
          const size_t o = first + static_cast<size_t>(oy) * g.OW + ox;
          if (argmax[o] == static_cast<int>(idx)) sum += dy[o];
        });
        dx[e] = sum;
      });
}

}  // namespace easyscale::graph::cuda_ops
