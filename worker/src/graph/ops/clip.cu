// Clip's CUDA kernels: clip.cc's selects per element. Where the count is a
// multiple of 4 and every array 16-byte aligned, a thread takes four elements
// as float4s (MobileNetV2's ReLU6s: one element a thread took 3.7 ms of its
// step, run 30).
#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/cuda_ops.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {

cudaError_t ClipForward(size_t n, float lo, float hi, const float* x, float* y,
                        cudaStream_t stream) {
  if (n % 4 == 0 && cuda::Aligned16(x) && cuda::Aligned16(y)) {
    return cuda::LaunchForEach(n / 4, stream, [=] __device__(size_t q) {
      const float4 v = reinterpret_cast<const float4*>(x)[q];
      reinterpret_cast<float4*>(y)[q] =
          make_float4(formulas::Clip(v.x, lo, hi), formulas::Clip(v.y, lo, hi),
                      formulas::Clip(v.z, lo, hi), formulas::Clip(v.w, lo, hi));
    });
  }
  return cuda::LaunchForEach(n, stream,
                             [=] __device__(size_t i) { y[i] = formulas::Clip(x[i], lo, hi); });
}

cudaError_t ClipBackward(size_t n, float lo, float hi, const float* x, const float* dy, float* dx,
                         cudaStream_t stream) {
  if (n % 4 == 0 && cuda::Aligned16(x) && cuda::Aligned16(dy) && cuda::Aligned16(dx)) {
    return cuda::LaunchForEach(n / 4, stream, [=] __device__(size_t q) {
      const float4 v = reinterpret_cast<const float4*>(x)[q];
      const float4 d = reinterpret_cast<const float4*>(dy)[q];
      reinterpret_cast<float4*>(dx)[q] =
          make_float4(formulas::ClipGrad(v.x, d.x, lo, hi), formulas::ClipGrad(v.y, d.y, lo, hi),
                      formulas::ClipGrad(v.z, d.z, lo, hi), formulas::ClipGrad(v.w, d.w, lo, hi));
    });
  }
  return cuda::LaunchForEach(
      n, stream, [=] __device__(size_t i) { dx[i] = formulas::ClipGrad(x[i], dy[i], lo, hi); });
}

}  // namespace easyscale::graph::cuda_ops
