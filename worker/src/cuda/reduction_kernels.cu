// Kernels with a reduction per output (channel sums, batch norm statistics,
// softmax cross-entropy, argmax). Each reduction runs in one thread in the CPU's
// fixed order, (b, p) or rows ascending: a parallel tree would be faster but
// would round differently. Parallelism is across channels, columns and rows.
#include <climits>

#include "cuda_kernels.h"
#include "easyscale/worker/detmath.h"
#include "easyscale/worker/kernel_formulas.h"
#include "launch.cuh"

namespace easyscale::cuda {

using detmath::Fma;

namespace {

// A channel's B*P values, (b, p) ascending, stream through shared memory:
// warps 1.. stage the next chunk while thread 0 folds the current one in order,
// so the serial chain waits on its own arithmetic, not on global memory.
constexpr int kChannelThreads = 256;
constexpr int kChannelChunk = 2048;

// Thread 0 reads 16 values of each input as four float4 while it folds the
// previous 16, so each step waits on the fold's own latency only.
template <int NIn, typename Fold>
__device__ void FoldChannel(int B, int C, int P, int c, const float* a, const float* b,
                            Fold&& fold) {
  static_assert(kChannelChunk % 16 == 0, "chunks hold whole groups of 16");
  __shared__ __align__(16) float buf[2][NIn][kChannelChunk];
  const int total = B * P;
  auto stage = [&](int slot, int first) {
    for (int i = static_cast<int>(threadIdx.x) - 32; i < kChannelChunk; i += kChannelThreads - 32) {
      const int e = first + i;
      if (e >= total) break;
      const size_t at = (static_cast<size_t>(e / P) * C + c) * P + e % P;
      buf[slot][0][i] = a[at];
      if constexpr (NIn == 2) buf[slot][1][i] = b[at];
    }
  };
  auto fold4 = [&](const float4& u, const float4& v) {
    if constexpr (NIn == 2) {
      fold(u.x, v.x);
      fold(u.y, v.y);
      fold(u.z, v.z);
      fold(u.w, v.w);
    } else {
      fold(u.x);
      fold(u.y);
      fold(u.z);
      fold(u.w);
    }
  };
  if (threadIdx.x >= 32) stage(0, 0);
  __syncthreads();
  int slot = 0;
  for (int first = 0; first < total; first += kChannelChunk) {
    if (threadIdx.x >= 32 && first + kChannelChunk < total) stage(slot ^ 1, first + kChannelChunk);
    if (threadIdx.x == 0) {
      const int n = total - first < kChannelChunk ? total - first : kChannelChunk;
      const float4* a4 = reinterpret_cast<const float4*>(buf[slot][0]);
      const float4* b4 = reinterpret_cast<const float4*>(buf[slot][NIn - 1]);
      const int groups = n / 16;
      float4 ra[4], rb[4];
      if (groups > 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j) ra[j] = a4[j], rb[j] = b4[j];
      }
      for (int g = 0; g < groups; ++g) {
        float4 na[4], nb[4];
        const int next = g + 1 < groups ? g + 1 : g;
#pragma unroll
        for (int j = 0; j < 4; ++j) na[j] = a4[next * 4 + j], nb[j] = b4[next * 4 + j];
#pragma unroll
        for (int j = 0; j < 4; ++j) fold4(ra[j], rb[j]);
#pragma unroll
        for (int j = 0; j < 4; ++j) ra[j] = na[j], rb[j] = nb[j];
      }
      for (int i = groups * 16; i < n; ++i) {
        if constexpr (NIn == 2) {
          fold(buf[slot][0][i], buf[slot][1][i]);
        } else {
          fold(buf[slot][0][i]);
        }
      }
    }
    __syncthreads();
    slot ^= 1;
  }
}

bool ChannelSizesOk(int B, int C, int P) {
  return B >= 0 && C >= 0 && P >= 0 && static_cast<long long>(B) * C * P <= INT_MAX;
}

__global__ void __launch_bounds__(kChannelThreads)
    ChannelSumKernel(int B, int C, int P, const float* dy, float* bias_grad) {
  const int c = blockIdx.x;
  float s = 0.0f;
  FoldChannel<1>(B, C, P, c, dy, nullptr, [&](float v) { s += v; });
  if (threadIdx.x == 0) bias_grad[c] = s;
}

__global__ void __launch_bounds__(kChannelThreads)
    BatchNormStatsKernel(int B, int C, int P, const float* x, float eps, float momentum,
                         float* running_mean, float* running_var, float* save_mean,
                         float* save_invstd) {
  __shared__ float mean_shared;
  const int c = blockIdx.x;
  const float count = static_cast<float>(B) * static_cast<float>(P);
  float sum = 0.0f;
  FoldChannel<1>(B, C, P, c, x, nullptr, [&](float v) { sum += v; });
  if (threadIdx.x == 0) mean_shared = sum / count;
  __syncthreads();
  const float mean = mean_shared;
  float sq = 0.0f;
  FoldChannel<1>(B, C, P, c, x, nullptr, [&](float v) {
    const float d = v - mean;
    sq = Fma(d, d, sq);
  });
  if (threadIdx.x != 0) return;
  save_mean[c] = mean;
  formulas::BatchNormFinish(mean, sq, count, eps, momentum, &save_invstd[c], &running_mean[c],
                            &running_var[c]);
}

__global__ void __launch_bounds__(kChannelThreads)
    BatchNormBackwardStatsKernel(int B, int C, int P, const float* x, const float* dy,
                                 const float* save_mean, const float* save_invstd, float* dgamma,
                                 float* dbeta) {
  const int c = blockIdx.x;
  const float mean = save_mean[c], invstd = save_invstd[c];
  float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
  FoldChannel<2>(B, C, P, c, x, dy, [&](float xv, float dyv) {
    const float xhat = (xv - mean) * invstd;
    sum_dy += dyv;
    sum_dy_xhat = Fma(dyv, xhat, sum_dy_xhat);
  });
  if (threadIdx.x != 0) return;
  dgamma[c] = sum_dy_xhat;
  dbeta[c] = sum_dy;
}

}  // namespace

cudaError_t ChannelSum(int B, int C, int P, const float* dy, float* bias_grad,
                       cudaStream_t stream) {
  if (!ChannelSizesOk(B, C, P)) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  ChannelSumKernel<<<C, kChannelThreads, 0, stream>>>(B, C, P, dy, bias_grad);
  return cudaGetLastError();
}

cudaError_t ColumnSum(int rows, int cols, const float* dy, float* grad, cudaStream_t stream) {
  return LaunchForEach(cols, stream, [=] __device__(size_t c) {
    float s = 0.0f;
    for (int r = 0; r < rows; ++r) s += dy[static_cast<size_t>(r) * cols + c];
    grad[c] = s;
  });
}

cudaError_t BatchNormTrain(int B, int C, int P, const float* x, const float* gamma,
                           const float* beta, float eps, float momentum, float* running_mean,
                           float* running_var, float* y, float* save_mean, float* save_invstd,
                           cudaStream_t stream) {
  if (!ChannelSizesOk(B, C, P)) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  BatchNormStatsKernel<<<C, kChannelThreads, 0, stream>>>(B, C, P, x, eps, momentum, running_mean,
                                                          running_var, save_mean, save_invstd);
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  return LaunchForEach(static_cast<size_t>(B) * C * P, stream, [=] __device__(size_t i) {
    const size_t c = i / P % C;
    y[i] = formulas::BatchNormOutput(x[i], save_mean[c], gamma[c] * save_invstd[c], beta[c]);
  });
}

cudaError_t BatchNormEval(int B, int C, int P, const float* x, const float* gamma,
                          const float* beta, float eps, const float* running_mean,
                          const float* running_var, float* y, cudaStream_t stream) {
  return LaunchForEach(static_cast<size_t>(B) * C * P, stream, [=] __device__(size_t i) {
    const size_t c = i / P % C;
    const float scale = gamma[c] * formulas::InvStd(running_var[c], eps);
    y[i] = formulas::BatchNormOutput(x[i], running_mean[c], scale, beta[c]);
  });
}

cudaError_t BatchNormBackward(int B, int C, int P, const float* x, const float* dy,
                              const float* gamma, const float* save_mean, const float* save_invstd,
                              float* dx, float* dgamma, float* dbeta, cudaStream_t stream) {
  if (!ChannelSizesOk(B, C, P)) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  const float count = static_cast<float>(B) * static_cast<float>(P);
  BatchNormBackwardStatsKernel<<<C, kChannelThreads, 0, stream>>>(B, C, P, x, dy, save_mean,
                                                                  save_invstd, dgamma, dbeta);
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  // dgamma and dbeta now hold the two sums the element pass needs.
  return LaunchForEach(static_cast<size_t>(B) * C * P, stream, [=] __device__(size_t i) {
    const size_t c = i / P % C;
    const float invstd = save_invstd[c];
    dx[i] = formulas::BatchNormInputGrad(x[i], dy[i], save_mean[c], invstd,
                                         gamma[c] * invstd / count, count, dbeta[c], dgamma[c]);
  });
}

namespace {

constexpr int kSoftmaxThreads = 256;

// One block: each thread does whole rows, then thread 0 adds the row losses in
// row order, as the CPU's running total does.
__global__ void SoftmaxCrossEntropyKernel(int rows, int classes, const float* logits,
                                          const int32_t* labels, float* dlogits, float* loss) {
  __shared__ float row_loss[kMaxSoftmaxRows];
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    row_loss[r] = formulas::SoftmaxCrossEntropyRow(
        classes, logits + static_cast<size_t>(r) * classes, labels[r], inv_rows,
        dlogits + static_cast<size_t>(r) * classes);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int r = 0; r < rows; ++r) total += row_loss[r];
    *loss = total * inv_rows;
  }
}

}  // namespace

cudaError_t SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                                float* dlogits, float* loss, cudaStream_t stream) {
  if (rows <= 0 || rows > kMaxSoftmaxRows || classes <= 0) return cudaErrorInvalidValue;
  SoftmaxCrossEntropyKernel<<<1, kSoftmaxThreads, 0, stream>>>(rows, classes, logits, labels,
                                                               dlogits, loss);
  return cudaGetLastError();
}

cudaError_t Argmax(int rows, int classes, const float* logits, int32_t* out, cudaStream_t stream) {
  return LaunchForEach(rows, stream, [=] __device__(size_t r) {
    const float* z = logits + r * classes;
    int best = 0;
    for (int c = 1; c < classes; ++c) {
      if (z[c] > z[best]) best = c;
    }
    out[r] = best;
  });
}

}  // namespace easyscale::cuda
