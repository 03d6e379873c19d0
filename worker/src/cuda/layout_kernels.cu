// Data movement and element-wise kernels: one thread per output, each output
// computed exactly as the CPU loop computes it (cpu_kernels.cc).
#include <algorithm>
#include <cstdint>

#include "cuda_kernels.h"
#include "easyscale/worker/kernel_formulas.h"
#include "easyscale/worker/philox.h"
#include "launch.cuh"

namespace easyscale::cuda {

namespace {

// 32x32 tiles through shared memory, so both the reads and the writes are
// coalesced; grid z is the matrix, grid y strides over tile rows.
constexpr int kTransposeTile = 32;
constexpr int kTransposeRowsPer = 8;

__global__ void TransposeKernel(int rows, int cols, const float* __restrict__ src,
                                float* __restrict__ dst) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const size_t matrix = static_cast<size_t>(blockIdx.z) * rows * cols;
  src += matrix;
  dst += matrix;
  const int c0 = blockIdx.x * kTransposeTile;
  for (int r0 = blockIdx.y * kTransposeTile; r0 < rows; r0 += gridDim.y * kTransposeTile) {
    for (int y = threadIdx.y; y < kTransposeTile; y += kTransposeRowsPer) {
      const int r = r0 + y, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[y][threadIdx.x] = src[static_cast<size_t>(r) * cols + c];
    }
    __syncthreads();
    for (int y = threadIdx.y; y < kTransposeTile; y += kTransposeRowsPer) {
      const int c = c0 + y, r = r0 + threadIdx.x;
      if (r < rows && c < cols) dst[static_cast<size_t>(c) * rows + r] = tile[threadIdx.x][y];
    }
    __syncthreads();
  }
}

}  // namespace

cudaError_t TransposeBatch(int batch, int rows, int cols, const float* src, float* dst,
                           cudaStream_t stream) {
  if (batch < 0 || batch > 65535 || rows < 0 || cols < 0) return cudaErrorInvalidValue;
  if (batch == 0 || rows == 0 || cols == 0) return cudaSuccess;
  const dim3 grid((cols + kTransposeTile - 1) / kTransposeTile,
                  std::min((rows + kTransposeTile - 1) / kTransposeTile, 65535), batch);
  TransposeKernel<<<grid, dim3(kTransposeTile, kTransposeRowsPer), 0, stream>>>(rows, cols, src,
                                                                                dst);
  return cudaGetLastError();
}

cudaError_t Transpose(int rows, int cols, const float* src, float* dst, cudaStream_t stream) {
  return TransposeBatch(1, rows, cols, src, dst, stream);
}

cudaError_t Dropout(size_t n, const DropoutDraw& draw, const float* x, const float* residual,
                    float* y, uint8_t* kept, cudaStream_t stream) {
  const float scale = 1.0f / (1.0f - draw.p);
  // One thread per Philox block of four elements, moved as one float4 and one
  // uchar4 where they are aligned (each thread's four scalar loads left a
  // warp's accesses 16 bytes apart: the encoder's dropouts took 1.2 ms a step
  // on an H100, about three times their bytes' time).
  const bool vectors = n % 4 == 0 && Aligned16(x) && Aligned16(y) &&
                       (residual == nullptr || Aligned16(residual)) &&
                       reinterpret_cast<uintptr_t>(kept) % 4 == 0;
  return LaunchForEach((n + 3) / 4, stream, [=] __device__(size_t g) {
    const unsigned bits = draw.KeptBits(g);
    const bool k0 = bits & 1u, k1 = bits & 2u, k2 = bits & 4u, k3 = bits & 8u;
    if (vectors) {
      const float4 in = reinterpret_cast<const float4*>(x)[g];
      float4 out = make_float4(
          in.x * formulas::DropoutScale(k0, scale), in.y * formulas::DropoutScale(k1, scale),
          in.z * formulas::DropoutScale(k2, scale), in.w * formulas::DropoutScale(k3, scale));
      if (residual != nullptr) {
        const float4 r = reinterpret_cast<const float4*>(residual)[g];
        out = make_float4(r.x + out.x, r.y + out.y, r.z + out.z, r.w + out.w);
      }
      reinterpret_cast<float4*>(y)[g] = out;
      reinterpret_cast<uchar4*>(kept)[g] = make_uchar4(k0, k1, k2, k3);
      return;
    }
    for (int lane = 0; lane < 4; ++lane) {
      const size_t i = 4 * g + lane;
      if (i >= n) break;
      const bool keeps = (bits >> lane) & 1u;
      kept[i] = keeps;
      const float dropped = x[i] * formulas::DropoutScale(keeps, scale);
      y[i] = residual != nullptr ? residual[i] + dropped : dropped;
    }
  });
}

cudaError_t DropoutBackward(size_t n, float p, const uint8_t* kept, const float* dy, float* dx,
                            cudaStream_t stream) {
  const float scale = 1.0f / (1.0f - p);
  // Four elements a thread as one float4 and one uchar4 where aligned, as the
  // forward (the encoder's dropout gradients: 0.67 ms a step on an H100, run
  // 21, about twice their bytes' time).
  if (n % 4 == 0 && Aligned16(dy) && Aligned16(dx) && reinterpret_cast<uintptr_t>(kept) % 4 == 0) {
    return LaunchForEach(n / 4, stream, [=] __device__(size_t g) {
      const float4 d = reinterpret_cast<const float4*>(dy)[g];
      const uchar4 k = reinterpret_cast<const uchar4*>(kept)[g];
      reinterpret_cast<float4*>(dx)[g] = make_float4(d.x * formulas::DropoutScale(k.x != 0, scale),
                                                     d.y * formulas::DropoutScale(k.y != 0, scale),
                                                     d.z * formulas::DropoutScale(k.z != 0, scale),
                                                     d.w * formulas::DropoutScale(k.w != 0, scale));
    });
  }
  return LaunchForEach(n, stream, [=] __device__(size_t i) {
    dx[i] = dy[i] * formulas::DropoutScale(kept[i] != 0, scale);
  });
}

cudaError_t Add(size_t n, const float* a, const float* b, float* out, cudaStream_t stream) {
  // Four sums a thread through float4s where aligned (a value read by several
  // nodes: the encoder's layer inputs feed three projections and a residual).
  if (n % 4 == 0 && Aligned16(a) && Aligned16(b) && Aligned16(out)) {
    return LaunchForEach(n / 4, stream, [=] __device__(size_t q) {
      const float4 x = reinterpret_cast<const float4*>(a)[q];
      const float4 y = reinterpret_cast<const float4*>(b)[q];
      reinterpret_cast<float4*>(out)[q] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    });
  }
  return LaunchForEach(n, stream, [=] __device__(size_t i) { out[i] = a[i] + b[i]; });
}

}  // namespace easyscale::cuda
