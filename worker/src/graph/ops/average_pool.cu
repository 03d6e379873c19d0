// AveragePool's CUDA kernels: average_pool.cc's order, one thread per output
// (forward) and per input element (backward, gathering in output order).
#include "graph/ops/cuda_ops.h"
#include "graph/ops/pool_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t AveragePoolForward(int planes, const cpu::ConvGeometry& g, const float* divisor,
                               const float* x, float* y, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEach(planes * per_plane, stream, [=] __device__(size_t o) {
    const size_t op = o % per_plane;
    y[o] = AveragePoolSum(g, x + o / per_plane * image, static_cast<int>(op / g.OW),
                          static_cast<int>(op % g.OW)) /
           divisor[op];
  });
}

cudaError_t AveragePoolBackward(int planes, const cpu::ConvGeometry& g, const float* divisor,
                                const float* dy, float* dx, cudaStream_t stream) {
  const size_t per_plane = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEach(planes * image, stream, [=] __device__(size_t e) {
    const float* plane_dy = dy + e / image * per_plane;
    const int idx = static_cast<int>(e % image);
    float sum = 0.0f;
    ForEachOutputReading(g, idx / g.W, idx % g.W, [&](int oy, int ox) {
      const size_t op = static_cast<size_t>(oy) * g.OW + ox;
      sum += plane_dy[op] / divisor[op];
    });
    dx[e] = sum;
  });
}

}  // namespace easyscale::graph::cuda_ops
