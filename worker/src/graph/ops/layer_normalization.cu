// LayerNormalization's CUDA kernels: layer_normalization.cc's order, one
// chain per row for its statistics (row_formulas.h's LayerNormRowStats) and
// its gradient sums (ascending index), one thread per element for the
// outputs, one chain per column for dScale and dB (rows ascending, in the op's
// blocks of rows); the chains fed through column_chains.cuh. The forward of
// rows that fit shared memory (the encoder's 768) runs in one kernel that
// reads x once: a block stages 8 rows, one thread a row folds the mean's and
// then the variance's chain from the staged row, and all write y (three
// kernels reading x three times took 1.2 ms a step of the encoder on an
// H100, about five times the bytes' time; under 0.67 in one, run 21). The
// input gradient of such rows likewise: a block stages x and dy * scale of 4
// rows, one thread a row folds the two sums, all write dx (instead of the
// sums' chains and a kernel for dx, each reading x and dy).
#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/column_chains.cuh"
#include "graph/ops/cuda_ops.h"
#include "graph/ops/row_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {
namespace {

constexpr int kStagedRows = 8;  // a block's rows, each folded by one thread
constexpr int kStagedThreads = 256;
// The staged rows and the rows' mean and invstd (static shared memory) in the
// 48 KiB a launch gets by default: rows up to 1,533.
constexpr int64_t kMaxStagedLd = (48 * 1024 / sizeof(float) - 2 * kStagedRows) / kStagedRows;

// The staged row stride: odd, so that the folding threads' reads of their
// rows' element j fall in different banks.
__host__ __device__ int64_t StagedLd(int64_t n) { return n | 1; }

__global__ void __launch_bounds__(kStagedThreads)
    LayerNormRowsKernel(int64_t rows, int n, float epsilon, const float* x, const float* scale,
                        const float* bias, float* y, float* mean, float* invstd) {
  extern __shared__ float staged[];  // [kStagedRows][ld]
  __shared__ float row_mean[kStagedRows], row_invstd[kStagedRows];
  const int ld = static_cast<int>(StagedLd(n));
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kStagedRows;
  const int count_rows = static_cast<int>(min(static_cast<int64_t>(kStagedRows), rows - r0));
  const float* const xb = x + r0 * n;
  for (int r = 0; r < count_rows; ++r) {
    for (int j = threadIdx.x; j < n; j += kStagedThreads) staged[r * ld + j] = xb[r * n + j];
  }
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < count_rows) {
    float m, s;
    LayerNormRowStats(staged + threadIdx.x * ld, n, epsilon, &m, &s);
    row_mean[threadIdx.x] = m;
    row_invstd[threadIdx.x] = s;
    mean[r0 + threadIdx.x] = m;
    invstd[r0 + threadIdx.x] = s;
  }
  __syncthreads();
  float* const yb = y + r0 * n;
  for (int r = 0; r < count_rows; ++r) {
    for (int j = threadIdx.x; j < n; j += kStagedThreads) {
      yb[r * n + j] =
          LayerNormOutput(staged[r * ld + j], row_mean[r], row_invstd[r], scale, bias, j);
    }
  }
}

// The gradient's staged rows: a block stages x and g = dy * scale of
// kGradRows rows (two arrays, so half the forward's rows), one thread a row
// folds FoldBatchNormGrads's two sums from them, and all write dx. The same
// rows as the forward's: both arrays and the rows' sums (static) fit 48 KiB.
constexpr int kGradRows = 4;
static_assert((2 * kGradRows * kMaxStagedLd + 2 * kGradRows) * sizeof(float) <= 48 * 1024,
              "the gradient stages the forward's longest row");

__global__ void __launch_bounds__(kStagedThreads)
    LayerNormGradRowsKernel(int64_t rows, int n, const float* x, const float* scale,
                            const float* dy, const float* mean, const float* invstd, float* dx) {
  extern __shared__ float staged[];  // x's rows, then g's: [2][kGradRows][ld]
  __shared__ float row_sums[kGradRows][2];
  const int ld = static_cast<int>(StagedLd(n));
  float* const xs = staged;
  float* const gs = staged + kGradRows * ld;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kGradRows;
  const int count_rows = static_cast<int>(min(static_cast<int64_t>(kGradRows), rows - r0));
  for (int r = 0; r < count_rows; ++r) {
    for (int j = threadIdx.x; j < n; j += kStagedThreads) {
      const int64_t e = (r0 + r) * n + j;
      xs[r * ld + j] = x[e];
      gs[r * ld + j] = dy[e] * (scale ? scale[j] : 1.0f);
    }
  }
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < count_rows) {
    const int r = static_cast<int>(threadIdx.x);
    const float m = mean[r0 + r], s = invstd[r0 + r];
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int j = 0; j < n; ++j) {
      formulas::FoldBatchNormGrads(xs[r * ld + j], gs[r * ld + j], m, s, &sum_g, &sum_g_xhat);
    }
    row_sums[r][0] = sum_g;
    row_sums[r][1] = sum_g_xhat;
  }
  __syncthreads();
  const float count = static_cast<float>(n);
  for (int r = 0; r < count_rows; ++r) {
    const float m = mean[r0 + r], s = invstd[r0 + r];
    const float k = s / count;
    for (int j = threadIdx.x; j < n; j += kStagedThreads) {
      dx[(r0 + r) * n + j] = formulas::BatchNormInputGrad(xs[r * ld + j], gs[r * ld + j], m, s, k,
                                                          count, row_sums[r][0], row_sums[r][1]);
    }
  }
}

}  // namespace

cudaError_t LayerNormForward(size_t rows, size_t n, float epsilon, const float* x,
                             const float* scale, const float* bias, float* y, float* mean,
                             float* invstd, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  if (StagedLd(static_cast<int64_t>(n)) <= kMaxStagedLd) {
    const size_t blocks = (rows + kStagedRows - 1) / kStagedRows;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    const size_t bytes = kStagedRows * StagedLd(static_cast<int64_t>(n)) * sizeof(float);
    LayerNormRowsKernel<<<static_cast<unsigned>(blocks), kStagedThreads, bytes, stream>>>(
        static_cast<int64_t>(rows), static_cast<int>(n), epsilon, x, scale, bias, y, mean, invstd);
    return cudaGetLastError();
  }
  // LayerNormRowStats's two chains per row, each fed through column_chains.cuh.
  const float count = static_cast<float>(n);
  const auto row_element = [=] __device__(int64_t j, int64_t r, float* terms) {
    terms[0] = x[r * n + j];
  };
  cudaError_t err = LaunchColumnChains<1, true>(
      static_cast<int64_t>(rows), static_cast<int64_t>(n), stream, row_element,
      [] __device__(int64_t, float* sum, const float* terms) { sum[0] += terms[0]; },
      [=] __device__(int64_t r, const float* sum) { mean[r] = sum[0] / count; });
  if (err != cudaSuccess) return err;
  err = LaunchColumnChains<1, true>(
      static_cast<int64_t>(rows), static_cast<int64_t>(n), stream, row_element,
      [=] __device__(int64_t r, float* sum_sq, const float* terms) {
        formulas::FoldSquaredDeviation(terms[0], mean[r], sum_sq);
      },
      [=] __device__(int64_t r, const float* sum_sq) {
        invstd[r] = formulas::InvStd(sum_sq[0] / count, epsilon);
      });
  if (err != cudaSuccess) return err;
  return cuda::LaunchForEachInChannels(
      1, rows, n, stream, [=] __device__(size_t e, size_t r, size_t j, size_t) {
        y[e] = LayerNormOutput(x[e], mean[r], invstd[r], scale, bias, static_cast<int64_t>(j));
      });
}

cudaError_t LayerNormBackward(size_t rows, size_t n, const float* x, const float* scale,
                              const float* dy, const float* mean, const float* invstd,
                              int64_t block_rows, float* row_sums, float* dx, float* dscale,
                              float* dbias, cudaStream_t stream) {
  if (dscale != nullptr || dbias != nullptr) {
    const cudaError_t err = LaunchColumnChainsInBlocks<2>(
        static_cast<int64_t>(n), static_cast<int64_t>(rows), block_rows, stream,
        [=] __device__(int64_t r, int64_t j, float* terms) {
          const size_t e = r * n + j;
          terms[0] = dscale != nullptr ? dy[e] * ((x[e] - mean[r]) * invstd[r]) : 0.0f;
          terms[1] = dy[e];
        },
        [] __device__(int64_t, float* sums, const float* terms) {
          sums[0] += terms[0];
          sums[1] += terms[1];
        },
        [=] __device__(int64_t j, const float* sums) {
          if (dscale != nullptr) dscale[j] = sums[0];
          if (dbias != nullptr) dbias[j] = sums[1];
        });
    if (err != cudaSuccess) return err;
  }
  if (dx == nullptr) return cudaSuccess;
  if (StagedLd(static_cast<int64_t>(n)) <= kMaxStagedLd) {
    const size_t blocks = (rows + kGradRows - 1) / kGradRows;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    const size_t bytes = 2 * kGradRows * StagedLd(static_cast<int64_t>(n)) * sizeof(float);
    LayerNormGradRowsKernel<<<static_cast<unsigned>(blocks), kStagedThreads, bytes, stream>>>(
        static_cast<int64_t>(rows), static_cast<int>(n), x, scale, dy, mean, invstd, dx);
    return cudaGetLastError();
  }
  const float count = static_cast<float>(n);
  const cudaError_t err = LaunchColumnChains<2, true>(
      static_cast<int64_t>(rows), static_cast<int64_t>(n), stream,
      [=] __device__(int64_t j, int64_t r, float* terms) {
        terms[0] = x[r * n + j];
        terms[1] = dy[r * n + j] * (scale ? scale[j] : 1.0f);
      },
      [=] __device__(int64_t r, float* sums, const float* terms) {
        formulas::FoldBatchNormGrads(terms[0], terms[1], mean[r], invstd[r], &sums[0], &sums[1]);
      },
      [=] __device__(int64_t r, const float* sums) {
        row_sums[2 * r] = sums[0];
        row_sums[2 * r + 1] = sums[1];
      });
  if (err != cudaSuccess) return err;
  return cuda::LaunchForEachInChannels(
      1, rows, n, stream, [=] __device__(size_t e, size_t r, size_t j, size_t) {
        const float g = dy[e] * (scale ? scale[j] : 1.0f);
        const float k = invstd[r] / count;
        dx[e] = formulas::BatchNormInputGrad(x[e], g, mean[r], invstd[r], k, count, row_sums[2 * r],
                                             row_sums[2 * r + 1]);
      });
}

}  // namespace easyscale::graph::cuda_ops
