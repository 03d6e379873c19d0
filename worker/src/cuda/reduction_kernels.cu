// Kernels with a reduction per output (channel sums, batch norm statistics,
// softmax cross-entropy, argmax), each in the CPU's fixed order: a channel's
// per-sample chains run in parallel, every other chain (the samples' results,
// rows) in one thread; a parallel tree would be faster but would round
// differently. Parallelism is across channels, samples, columns and rows.
#include <climits>
#include <cstdint>

#include "cuda_kernels.h"
#include "easyscale/worker/kernel_formulas.h"
#include "launch.cuh"

namespace easyscale::cuda {

namespace {

// A channel's sums in the CPU's two-level order: thread t folds sample b's P
// values (p ascending, from 0) for b = t, t + kChannelThreads, ...; thread 0
// then adds the samples' results in b order. fold(a, b, part) takes one
// element of each input (b unused with one input) into the sample's partials.
// The sums end up in `total` on thread 0.
constexpr int kChannelThreads = 128;

template <int NSum, typename Fold>
__device__ void ChannelSums(int B, int C, int P, int c, const float* a, const float* b, Fold&& fold,
                            float (&total)[NSum]) {
  __shared__ float parts[NSum][kChannelThreads];
  const bool vector = P % 4 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 &&
                      (b == nullptr || reinterpret_cast<uintptr_t>(b) % 16 == 0);
  for (int s = 0; s < NSum; ++s) total[s] = 0.0f;
  for (int b0 = 0; b0 < B; b0 += kChannelThreads) {
    const int sample = b0 + static_cast<int>(threadIdx.x);
    float part[NSum];
    for (int s = 0; s < NSum; ++s) part[s] = 0.0f;
    if (sample < B) {
      const size_t row = (static_cast<size_t>(sample) * C + c) * P;
      const float* ra = a + row;
      const float* rb = b != nullptr ? b + row : ra;
      if (vector) {
        // kAhead vectors of each input are read before any is folded: the
        // chains are few (B * C) and long, so each keeps many loads in flight.
        constexpr int kAhead = 8;
        const float4* ua = reinterpret_cast<const float4*>(ra);
        const float4* ub = reinterpret_cast<const float4*>(rb);
        auto fold4 = [&](const float4& u, const float4& v) {
          fold(u.x, v.x, part);
          fold(u.y, v.y, part);
          fold(u.z, v.z, part);
          fold(u.w, v.w, part);
        };
        int q = 0;
        for (; q + kAhead <= P / 4; q += kAhead) {
          float4 u[kAhead], v[kAhead];
#pragma unroll
          for (int i = 0; i < kAhead; ++i) u[i] = ua[q + i], v[i] = ub[q + i];
#pragma unroll
          for (int i = 0; i < kAhead; ++i) fold4(u[i], v[i]);
        }
        for (; q < P / 4; ++q) fold4(ua[q], ub[q]);
      } else {
#pragma unroll 4
        for (int p = 0; p < P; ++p) fold(ra[p], rb[p], part);
      }
    }
    for (int s = 0; s < NSum; ++s) parts[s][threadIdx.x] = part[s];
    __syncthreads();
    if (threadIdx.x == 0) {
      const int n = min(kChannelThreads, B - b0);
      for (int i = 0; i < n; ++i) {
        for (int s = 0; s < NSum; ++s) total[s] += parts[s][i];
      }
    }
    __syncthreads();
  }
}

bool ChannelSizesOk(int B, int C, int P) {
  return B >= 0 && C >= 0 && P >= 0 && static_cast<long long>(B) * C * P <= INT_MAX;
}

__global__ void __launch_bounds__(kChannelThreads)
    ChannelSumKernel(int B, int C, int P, const float* dy, float* bias_grad) {
  const int c = blockIdx.x;
  float s[1];
  ChannelSums<1>(
      B, C, P, c, dy, nullptr, [](float v, float, float(&part)[1]) { part[0] += v; }, s);
  if (threadIdx.x == 0) bias_grad[c] = s[0];
}

__global__ void __launch_bounds__(kChannelThreads)
    BatchNormStatsKernel(int B, int C, int P, const float* x, float eps, float momentum,
                         float* running_mean, float* running_var, float* save_mean,
                         float* save_invstd) {
  __shared__ float mean_shared;
  const int c = blockIdx.x;
  const float count = static_cast<float>(B) * static_cast<float>(P);
  float sum[1], sq[1];
  ChannelSums<1>(
      B, C, P, c, x, nullptr, [](float v, float, float(&part)[1]) { part[0] += v; }, sum);
  if (threadIdx.x == 0) mean_shared = sum[0] / count;
  __syncthreads();
  const float mean = mean_shared;
  ChannelSums<1>(
      B, C, P, c, x, nullptr,
      [mean](float v, float, float(&part)[1]) {
        formulas::FoldSquaredDeviation(v, mean, &part[0]);
      },
      sq);
  if (threadIdx.x != 0) return;
  save_mean[c] = mean;
  formulas::BatchNormFinish(mean, sq[0], count, eps, momentum, &save_invstd[c], &running_mean[c],
                            &running_var[c]);
}

__global__ void __launch_bounds__(kChannelThreads)
    BatchNormBackwardStatsKernel(int B, int C, int P, const float* x, const float* dy,
                                 const float* save_mean, const float* save_invstd, float* dgamma,
                                 float* dbeta) {
  const int c = blockIdx.x;
  const float mean = save_mean[c], invstd = save_invstd[c];
  float sums[2];  // sum of dy, sum of dy * xhat
  ChannelSums<2>(
      B, C, P, c, x, dy,
      [mean, invstd](float xv, float dyv, float(&part)[2]) {
        formulas::FoldBatchNormGrads(xv, dyv, mean, invstd, &part[0], &part[1]);
      },
      sums);
  if (threadIdx.x != 0) return;
  dgamma[c] = sums[1];
  dbeta[c] = sums[0];
}

}  // namespace

cudaError_t ChannelSum(int B, int C, int P, const float* dy, float* bias_grad,
                       cudaStream_t stream) {
  if (!ChannelSizesOk(B, C, P)) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  ChannelSumKernel<<<C, kChannelThreads, 0, stream>>>(B, C, P, dy, bias_grad);
  return cudaGetLastError();
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
