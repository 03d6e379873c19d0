// Kernels with a reduction per output (channel sums, batch norm statistics,
// softmax cross-entropy, argmax). Each reduction runs in one thread in the CPU's
// fixed order, (b, p) or rows ascending: a parallel tree would be faster but
// would round differently. Parallelism is across channels, columns and rows.
#include "cuda_kernels.h"
#include "easyscale/worker/detmath.h"
#include "launch.cuh"

namespace easyscale::cuda {

using detmath::Fma;

cudaError_t ChannelSum(int B, int C, int P, const float* dy, float* bias_grad,
                       cudaStream_t stream) {
  return LaunchForEach(C, stream, [=] __device__(size_t c) {
    float s = 0.0f;
    for (int b = 0; b < B; ++b) {
      const float* row = dy + (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p) s += row[p];
    }
    bias_grad[c] = s;
  });
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
  const float count = static_cast<float>(B) * static_cast<float>(P);
  cudaError_t err = LaunchForEach(C, stream, [=] __device__(size_t c) {
    float sum = 0.0f;
    for (int b = 0; b < B; ++b) {
      const float* row = x + (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p) sum += row[p];
    }
    const float mean = sum / count;
    float sq = 0.0f;
    for (int b = 0; b < B; ++b) {
      const float* row = x + (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p) {
        const float d = row[p] - mean;
        sq = Fma(d, d, sq);
      }
    }
    const float var = sq / count;
    save_mean[c] = mean;
    save_invstd[c] = 1.0f / sqrtf(var + eps);
    const float unbiased = count > 1.0f ? sq / (count - 1.0f) : var;
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
    running_var[c] = (1.0f - momentum) * running_var[c] + momentum * unbiased;
  });
  if (err != cudaSuccess) return err;
  return LaunchForEach(static_cast<size_t>(B) * C * P, stream, [=] __device__(size_t i) {
    const size_t c = i / P % C;
    const float scale = gamma[c] * save_invstd[c];
    y[i] = Fma(x[i] - save_mean[c], scale, beta[c]);
  });
}

cudaError_t BatchNormEval(int B, int C, int P, const float* x, const float* gamma,
                          const float* beta, float eps, const float* running_mean,
                          const float* running_var, float* y, cudaStream_t stream) {
  return LaunchForEach(static_cast<size_t>(B) * C * P, stream, [=] __device__(size_t i) {
    const size_t c = i / P % C;
    const float scale = gamma[c] * (1.0f / sqrtf(running_var[c] + eps));
    y[i] = Fma(x[i] - running_mean[c], scale, beta[c]);
  });
}

cudaError_t BatchNormBackward(int B, int C, int P, const float* x, const float* dy,
                              const float* gamma, const float* save_mean, const float* save_invstd,
                              float* dx, float* dgamma, float* dbeta, cudaStream_t stream) {
  const float count = static_cast<float>(B) * static_cast<float>(P);
  cudaError_t err = LaunchForEach(C, stream, [=] __device__(size_t c) {
    const float mean = save_mean[c], invstd = save_invstd[c];
    float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
    for (int b = 0; b < B; ++b) {
      const size_t off = (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p) {
        const float xhat = (x[off + p] - mean) * invstd;
        sum_dy += dy[off + p];
        sum_dy_xhat = Fma(dy[off + p], xhat, sum_dy_xhat);
      }
    }
    dgamma[c] = sum_dy_xhat;
    dbeta[c] = sum_dy;
  });
  if (err != cudaSuccess) return err;
  // dgamma and dbeta now hold the two sums the element pass needs.
  return LaunchForEach(static_cast<size_t>(B) * C * P, stream, [=] __device__(size_t i) {
    const size_t c = i / P % C;
    const float invstd = save_invstd[c];
    const float xhat = (x[i] - save_mean[c]) * invstd;
    const float k = gamma[c] * invstd / count;
    const float inner = Fma(-xhat, dgamma[c], count * dy[i] - dbeta[c]);
    dx[i] = k * inner;
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
    const float* z = logits + static_cast<size_t>(r) * classes;
    float* dz = dlogits + static_cast<size_t>(r) * classes;
    float m = z[0];
    for (int c = 1; c < classes; ++c) m = z[c] > m ? z[c] : m;
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) {
      dz[c] = detmath::Exp(z[c] - m);
      sum += dz[c];
    }
    const float inv_sum = 1.0f / sum;
    const int label = labels[r];
    row_loss[r] = detmath::Log(sum) - (z[label] - m);
    for (int c = 0; c < classes; ++c) {
      const float prob = dz[c] * inv_sum;
      dz[c] = (prob - (c == label ? 1.0f : 0.0f)) * inv_rows;
    }
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
