// Data movement and element-wise kernels: one thread per output, each output
// computed exactly as the CPU loop computes it (cpu_kernels.cc).
#include "cuda_kernels.h"
#include "easyscale/worker/kernel_formulas.h"
#include "easyscale/worker/philox.h"
#include "launch.cuh"

namespace easyscale::cuda {

cudaError_t Transpose(int rows, int cols, const float* src, float* dst, cudaStream_t stream) {
  return LaunchForEach(static_cast<size_t>(rows) * cols, stream, [=] __device__(size_t i) {
    const size_t r = i / cols, c = i % cols;
    dst[c * rows + r] = src[i];
  });
}

cudaError_t Dropout(size_t n, float p, uint32_t key0, uint32_t key1, const uint64_t* counter_slot,
                    uint64_t counter_offset, const float* x, float* y, float* mask,
                    cudaStream_t stream) {
  const float scale = 1.0f / (1.0f - p);
  // One thread per Philox block of four elements.
  return LaunchForEach((n + 3) / 4, stream, [=] __device__(size_t g) {
    const uint64_t base = (counter_slot != nullptr ? *counter_slot : 0) + counter_offset;
    uint32_t bits[4];
    Philox4x32({key0, key1}, base + g, 0, bits);
    for (int lane = 0; lane < 4; ++lane) {
      const size_t i = 4 * g + lane;
      if (i >= n) break;
      const float m = formulas::DropoutMask(bits[lane], p, scale);
      mask[i] = m;
      y[i] = x[i] * m;
    }
  });
}

cudaError_t Mul(size_t n, const float* a, const float* b, float* out, cudaStream_t stream) {
  return LaunchForEach(n, stream, [=] __device__(size_t i) { out[i] = a[i] * b[i]; });
}

cudaError_t Add(size_t n, const float* a, const float* b, float* out, cudaStream_t stream) {
  return LaunchForEach(n, stream, [=] __device__(size_t i) { out[i] = a[i] + b[i]; });
}

}  // namespace easyscale::cuda
