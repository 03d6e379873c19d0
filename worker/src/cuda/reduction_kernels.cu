// Kernels with a reduction per output (channel sums, batch norm statistics,
// softmax cross-entropy, argmax), each in the CPU's fixed order: a channel's
// per-sample chains run in parallel, every other chain (the samples' results,
// rows) in one thread; a parallel tree would be faster but would round
// differently. Parallelism is across channels, samples, columns and rows.
#include <climits>
#include <cstdint>

#include "cp_async.cuh"
#include "cuda_kernels.h"
#include "easyscale/worker/kernel_formulas.h"
#include "launch.cuh"
#include "stream_scratch.h"

namespace easyscale::cuda {

namespace {

// A channel's sums run in the CPU's two-level order (cpu_kernels.cc
// ChannelSums): each sample's chain of fold(a, b, params, part) over the
// positions from 0, then the samples' results added in sample order from 0.
// The chains are few (B * C) and long, so a chain's loads, not its adds, set
// the pace: a one-warp block takes 32 samples of one channel, a lane each,
// and streams their rows through a ring of shared-memory slices that cp.async
// fills with coalesced 128-byte row segments, several slices ahead; each lane
// folds its own row from shared memory (column_chains.cuh's barrier-phased
// block, one round of loads in flight, measured slower: BENCHMARKS run 10).
// The samples' results go to partial[(s * C + c) * B + b]; SampleTotal adds
// them.
constexpr int kWarpRows = 32;                              // samples a block folds, a lane each
constexpr int kSliceFloats = 32;                           // a row's positions per slice: 128 bytes
constexpr int kRingFloats = 8 * kWarpRows * kSliceFloats;  // 32 KiB: 8 slices of one input

// What a chain's fold needs of its channel (set up once per block).
struct ChannelParams {
  float mean = 0.0f, invstd = 0.0f;
  float scale = 0.0f, beta = 0.0f;  // a fused activation's: its input recomputed from x
};

// Slice t of rows [0, rows) from `src` (row r at src + r * row_stride) into
// `slot`, swizzled so that both the copies and a lane's reads of its own row
// hit distinct banks: float4 q of row r at q ^ (r % 8), or float e at e ^ r.
template <bool kVector>
__device__ void CopySlice(const float* src, size_t row_stride, int rows, int P, int t,
                          float* slot) {
  const int lane = static_cast<int>(threadIdx.x);
  const int p0 = t * kSliceFloats;
  if constexpr (kVector) {
    const int q = lane % 8, p = p0 + 4 * q;  // P % 4 == 0: a float4 is whole or absent
    if (p >= P) return;
#pragma unroll
    for (int j = 0; j < kWarpRows / 4; ++j) {
      const int r = 4 * j + lane / 8;
      if (r < rows)
        CpAsync16(slot + r * kSliceFloats + 4 * (q ^ (r % 8)), src + r * row_stride + p, 16);
    }
  } else {
    const int p = p0 + lane;
    if (p >= P) return;
    for (int r = 0; r < rows; ++r)
      CpAsync4(slot + r * kSliceFloats + (lane ^ r), src + r * row_stride + p, true);
  }
}

// Row r of a landed slice of each input (the same slot twice for one input):
// n values (n % 4 == 0 when kVector), folded in position order.
template <bool kVector, int NSum, typename Fold>
__device__ void FoldSlice(const float* slot_a, const float* slot_b, int r, int n,
                          const ChannelParams& params, Fold& fold, float (&part)[NSum]) {
  const float* ra = slot_a + r * kSliceFloats;
  const float* rb = slot_b + r * kSliceFloats;
  if constexpr (kVector) {
    auto fold4 = [&](int q) {
      const int at = 4 * (q ^ (r % 8));
      const float4 u = *reinterpret_cast<const float4*>(ra + at);
      const float4 v = *reinterpret_cast<const float4*>(rb + at);
      fold(u.x, v.x, params, part);
      fold(u.y, v.y, params, part);
      fold(u.z, v.z, params, part);
      fold(u.w, v.w, params, part);
    };
    if (n == kSliceFloats) {
#pragma unroll
      for (int q = 0; q < kSliceFloats / 4; ++q) fold4(q);
    } else {
      for (int q = 0; q < n / 4; ++q) fold4(q);
    }
  } else {
    for (int e = 0; e < n; ++e) fold(ra[e ^ r], rb[e ^ r], params, part);
  }
}

// Grid (C, ceil(B / 32)), one warp a block. setup(c) gives the channel's
// ChannelParams; NIn inputs (b unused with one).
template <int NIn, int NSum, bool kVector, typename Setup, typename Fold>
__global__ void __launch_bounds__(kWarpRows)
    SampleSumsKernel(int B, int C, int P, const float* a, const float* b, Setup setup, Fold fold,
                     float* partial) {
  constexpr int kStages = kRingFloats / (NIn * kWarpRows * kSliceFloats);
  __shared__ __align__(16) float ring[kStages][NIn][kWarpRows * kSliceFloats];
  const int c = static_cast<int>(blockIdx.x);
  const int b0 = static_cast<int>(blockIdx.y) * kWarpRows;
  const int rows = min(kWarpRows, B - b0);
  const int r = static_cast<int>(threadIdx.x);
  const size_t row_stride = static_cast<size_t>(C) * P;
  const size_t first = (static_cast<size_t>(b0) * C + c) * P;
  const float* src[NIn];
  src[0] = a + first;
  if constexpr (NIn == 2) src[1] = b + first;
  const ChannelParams params = setup(c);
  const int slices = (P + kSliceFloats - 1) / kSliceFloats;
  auto copy = [&](int t) {
    if (t < slices) {
      for (int in = 0; in < NIn; ++in)
        CopySlice<kVector>(src[in], row_stride, rows, P, t, ring[t % kStages][in]);
    }
    CpAsyncCommit();  // empty groups too, so the wait count stays exact
  };
  for (int t = 0; t < kStages - 1; ++t) copy(t);
  float part[NSum];
  for (int s = 0; s < NSum; ++s) part[s] = 0.0f;
  for (int t = 0; t < slices; ++t) {
    copy(t + kStages - 1);       // into the slot the warp finished reading last round
    CpAsyncWait<kStages - 1>();  // this lane's copies of slice t landed
    __syncwarp();                // and every other lane's
    if (r < rows) {
      FoldSlice<kVector>(ring[t % kStages][0], ring[t % kStages][NIn - 1], r,
                         min(kSliceFloats, P - t * kSliceFloats), params, fold, part);
    }
    __syncwarp();  // the slot is read before it is refilled
  }
  CpAsyncWait<0>();  // no copy outlives the block
  if (r < rows) {
    for (int s = 0; s < NSum; ++s) partial[(static_cast<size_t>(s) * C + c) * B + b0 + r] = part[s];
  }
}

template <int NIn, int NSum, typename Setup, typename Fold>
cudaError_t SampleSums(int B, int C, int P, const float* a, const float* b, Setup setup, Fold fold,
                       float* partial, cudaStream_t stream) {
  const int groups = (B + kWarpRows - 1) / kWarpRows;
  if (groups > 65535) return cudaErrorInvalidValue;
  if (groups == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(C), static_cast<unsigned>(groups));
  const bool vector = P % 4 == 0 && Aligned16(a) && (NIn == 1 || Aligned16(b));
  if (vector) {
    SampleSumsKernel<NIn, NSum, true>
        <<<grid, kWarpRows, 0, stream>>>(B, C, P, a, b, setup, fold, partial);
  } else {
    SampleSumsKernel<NIn, NSum, false>
        <<<grid, kWarpRows, 0, stream>>>(B, C, P, a, b, setup, fold, partial);
  }
  return cudaGetLastError();
}

// Channel c's samples' results (SampleSums' layout, one sum) added in sample
// order from 0.
__device__ float SampleTotal(const float* partial, int B, int c) {
  float total = 0.0f;
  for (int b = 0; b < B; ++b) total += partial[static_cast<size_t>(c) * B + b];
  return total;
}

bool ChannelSizesOk(int B, int C, int P) {
  return B >= 0 && C >= 0 && P >= 0 && static_cast<long long>(B) * C * P <= INT_MAX;
}

struct NoParams {
  __device__ ChannelParams operator()(int) const { return {}; }
};

// A channel's saved statistics for the backward pass, with what a fused
// activation's recomputed input needs (beta null: no activation).
struct SavedParams {
  const float *save_mean, *save_invstd, *gamma, *beta;
  __device__ ChannelParams operator()(int c) const {
    return ChannelParams{save_mean[c], save_invstd[c], gamma[c] * save_invstd[c],
                         beta != nullptr ? beta[c] : 0.0f};
  }
};

// The gradient into a batch norm's output: the fused activation's, from the
// output recomputed as the forward pass computed it (the same bits).
__device__ __forceinline__ float OutputGrad(const formulas::Activation& activation, float x,
                                            float dy, const ChannelParams& ch) {
  return activation.Grad(formulas::BatchNormOutput(x, ch.mean, ch.scale, ch.beta), dy);
}

struct AddValue {
  __device__ void operator()(float v, float, const ChannelParams&, float (&part)[1]) const {
    part[0] += v;
  }
};

}  // namespace

cudaError_t ChannelSum(int B, int C, int P, const float* dy, float* bias_grad,
                       cudaStream_t stream) {
  if (!ChannelSizesOk(B, C, P)) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  return WithStreamScratch(static_cast<size_t>(C) * B, stream, [&](float* sums) {
    cudaError_t err = SampleSums<1, 1>(B, C, P, dy, nullptr, NoParams{}, AddValue{}, sums, stream);
    if (err != cudaSuccess) return err;
    return LaunchForEach(C, stream, [=] __device__(size_t c) {
      bias_grad[c] = SampleTotal(sums, B, static_cast<int>(c));
    });
  });
}

cudaError_t BatchNormTrain(int B, int C, int P, const float* x, const float* gamma,
                           const float* beta, float eps, float momentum, float* running_mean,
                           float* running_var, float* y, float* save_mean, float* save_invstd,
                           formulas::Activation activation, cudaStream_t stream) {
  if (!ChannelSizesOk(B, C, P)) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  const float count = static_cast<float>(B) * static_cast<float>(P);
  const size_t per_sum = static_cast<size_t>(C) * B;
  cudaError_t err = WithStreamScratch(2 * per_sum, stream, [&](float* sums) {
    float* const squares = sums + per_sum;
    cudaError_t e = SampleSums<1, 1>(B, C, P, x, nullptr, NoParams{}, AddValue{}, sums, stream);
    if (e != cudaSuccess) return e;
    e = SampleSums<1, 1>(
        B, C, P, x, nullptr,
        [=] __device__(int c) { return ChannelParams{SampleTotal(sums, B, c) / count}; },
        [] __device__(float v, float, const ChannelParams& ch, float(&part)[1]) {
          formulas::FoldSquaredDeviation(v, ch.mean, &part[0]);
        },
        squares, stream);
    if (e != cudaSuccess) return e;
    return LaunchForEach(C, stream, [=] __device__(size_t c) {
      const int ch = static_cast<int>(c);
      const float mean = SampleTotal(sums, B, ch) / count;
      save_mean[c] = mean;
      formulas::BatchNormFinish(mean, SampleTotal(squares, B, ch), count, eps, momentum,
                                &save_invstd[c], &running_mean[c], &running_var[c]);
    });
  });
  if (err != cudaSuccess) return err;
  return LaunchForEachInChannels(
      B, C, P, stream, [=] __device__(size_t i, unsigned c, unsigned, size_t) {
        y[i] = activation.Apply(
            formulas::BatchNormOutput(x[i], save_mean[c], gamma[c] * save_invstd[c], beta[c]));
      });
}

cudaError_t BatchNormEval(int B, int C, int P, const float* x, const float* gamma,
                          const float* beta, float eps, const float* running_mean,
                          const float* running_var, float* y, formulas::Activation activation,
                          cudaStream_t stream) {
  if (!ChannelSizesOk(B, C, P)) return cudaErrorInvalidValue;
  return LaunchForEachInChannels(
      B, C, P, stream, [=] __device__(size_t i, unsigned c, unsigned, size_t) {
        const float scale = gamma[c] * formulas::InvStd(running_var[c], eps);
        y[i] = activation.Apply(formulas::BatchNormOutput(x[i], running_mean[c], scale, beta[c]));
      });
}

cudaError_t BatchNormBackward(int B, int C, int P, const float* x, const float* dy,
                              const float* gamma, const float* beta, const float* save_mean,
                              const float* save_invstd, float* dx, float* dgamma, float* dbeta,
                              formulas::Activation activation, cudaStream_t stream) {
  if (!ChannelSizesOk(B, C, P)) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  const float count = static_cast<float>(B) * static_cast<float>(P);
  const size_t per_sum = static_cast<size_t>(C) * B;
  const SavedParams params{save_mean, save_invstd, gamma,
                           activation.kind != formulas::Activation::kNone ? beta : nullptr};
  cudaError_t err = WithStreamScratch(2 * per_sum, stream, [&](float* sums) {
    // sums: each sample's sum of dy, then of dy * xhat
    cudaError_t e = SampleSums<2, 2>(
        B, C, P, x, dy, params,
        [activation] __device__(float xv, float dyv, const ChannelParams& ch, float(&part)[2]) {
          formulas::FoldBatchNormGrads(xv, OutputGrad(activation, xv, dyv, ch), ch.mean, ch.invstd,
                                       &part[0], &part[1]);
        },
        sums, stream);
    if (e != cudaSuccess) return e;
    return LaunchForEach(C, stream, [=] __device__(size_t c) {
      dbeta[c] = SampleTotal(sums, B, static_cast<int>(c));
      dgamma[c] = SampleTotal(sums + per_sum, B, static_cast<int>(c));
    });
  });
  if (err != cudaSuccess) return err;
  // dgamma and dbeta now hold the two sums the element pass needs.
  return LaunchForEachInChannels(
      B, C, P, stream, [=] __device__(size_t i, unsigned c, unsigned, size_t) {
        const ChannelParams ch = params(static_cast<int>(c));
        dx[i] =
            formulas::BatchNormInputGrad(x[i], OutputGrad(activation, x[i], dy[i], ch), ch.mean,
                                         ch.invstd, ch.scale / count, count, dbeta[c], dgamma[c]);
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
