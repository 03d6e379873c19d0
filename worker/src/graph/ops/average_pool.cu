// AveragePool's CUDA kernels: average_pool.cc's order, one thread per output
// (forward) and per input element (backward, gathering in output order),
// each with its plane and position from LaunchForEachInChannels.
#include "graph/ops/cuda_ops.h"
#include "graph/ops/pool_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t AveragePoolForward(int planes, const cpu::ConvGeometry& g, const float* divisor,
                               const float* x, float* y, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEachInChannels(
      1, planes, per_plane, stream, [=] __device__(size_t o, unsigned, unsigned op, size_t plane) {
        const int oy = static_cast<int>(op) / g.OW;
        y[o] = AveragePoolSum(g, x + plane * image, oy, static_cast<int>(op) - oy * g.OW) /
               divisor[op];
      });
}

cudaError_t AveragePoolBackward(int planes, const cpu::ConvGeometry& g, const float* divisor,
                                const float* dy, float* dx, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEachInChannels(
      1, planes, image, stream, [=] __device__(size_t e, unsigned, unsigned idx, size_t plane) {
        const float* plane_dy = dy + plane * per_plane;
        const int iy = static_cast<int>(idx) / g.W;
        float sum = 0.0f;
        ForEachOutputReading(g, iy, static_cast<int>(idx) - iy * g.W, [&](int oy, int ox) {
          const size_t op = static_cast<size_t>(oy) * g.OW + ox;
          sum += plane_dy[op] / divisor[op];
        });
        dx[e] = sum;
      });
}

}  // namespace easyscale::graph::cuda_ops
