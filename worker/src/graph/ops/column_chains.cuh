// File: worker/src/graph/ops/column_chains.cuh
//
// Many independent reductions that are each one sequential chain (the CPU's
// order): output c folds term(t, c) for t = 0, 1, ..., length-1 into kTerms
// accumulators from +0. A chain cannot be split, so a thread per output is the
// parallelism; what makes it fast is feeding the chains. A block owns a few
// outputs and walks t in chunks: all its threads compute the chunk's terms
// into shared memory (coalesced loads, many in flight), then one warp runs the
// folds, one output per lane, t ascending. The bias and LayerNorm gradients
// use it (thousands of rows, hundreds of outputs), and LayerNorm's row
// statistics (hundreds of elements per row).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "launch.cuh"
#include "stream_scratch.h"

namespace easyscale::graph::cuda_ops {

inline constexpr int kChainThreads = 256;  // all of them load
// A block's outputs and chunk depth: 32 outputs (one warp's lanes) 128 deep,
// or, where the outputs are too few to fill the GPU with such blocks, 8
// outputs 512 deep: the same terms per chunk (one round of loads in flight)
// over four times the blocks.
inline constexpr int64_t kNarrowBelowOutputs = 8192;

// load(t, c, terms) writes output c's kTerms terms at t; fold(c, acc, terms)
// adds them into acc; store(c, acc) writes the result. kLanesAlongT: the
// loads' consecutive threads take consecutive t (terms contiguous along t,
// such as a row's elements) rather than consecutive c. With row blocks (grid
// y > 1), block y's chains fold t = y * length ... (y + 1) * length - 1 and
// store as y * outputs + c: the chain's place, not a division, gives its block
// (a 64-bit division a term cost more than the loads: the encoder's bias
// gradients).
template <int kTerms, bool kLanesAlongT, int kOutputs, int kChunk, typename Load, typename Fold,
          typename Store>
__global__ void __launch_bounds__(kChainThreads)
    ColumnChainsKernel(int64_t outputs, int64_t length, Load load, Fold fold, Store store) {
  static_assert(kOutputs <= 32, "one warp folds");
  __shared__ float tile[kChunk][kOutputs + 1][kTerms];
  const int tid = threadIdx.x;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kOutputs;
  const int64_t first_t = static_cast<int64_t>(blockIdx.y) * length;
  float acc[kTerms];
  for (int i = 0; i < kTerms; ++i) acc[i] = 0.0f;
  for (int64_t t0 = 0; t0 < length; t0 += kChunk) {
    const int valid = static_cast<int>(length - t0 < kChunk ? length - t0 : kChunk);
    for (int e = tid; e < kChunk * kOutputs; e += kChainThreads) {
      const int t = kLanesAlongT ? e % kChunk : e / kOutputs;
      const int c = kLanesAlongT ? e / kChunk : e % kOutputs;
      if (t < valid && c0 + c < outputs) load(first_t + t0 + t, c0 + c, tile[t][c]);
    }
    __syncthreads();
    if (tid < kOutputs && c0 + tid < outputs) {
#pragma unroll 4
      for (int t = 0; t < valid; ++t) fold(c0 + tid, acc, tile[t][tid]);
    }
    __syncthreads();
  }
  if (tid < kOutputs && c0 + tid < outputs) {
    store(static_cast<int64_t>(blockIdx.y) * outputs + c0 + tid, acc);
  }
}

template <int kTerms, bool kLanesAlongT, int kOutputs, int kChunk, typename Load, typename Fold,
          typename Store>
cudaError_t LaunchColumnChainsOf(int64_t outputs, int64_t length, int64_t row_blocks,
                                 cudaStream_t stream, Load load, Fold fold, Store store) {
  const int64_t blocks = (outputs + kOutputs - 1) / kOutputs;
  if (blocks == 0 || row_blocks == 0) return cudaSuccess;
  if (blocks > 0x7fffffff || row_blocks > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(row_blocks));
  ColumnChainsKernel<kTerms, kLanesAlongT, kOutputs, kChunk>
      <<<grid, kChainThreads, 0, stream>>>(outputs, length, load, fold, store);
  return cudaGetLastError();
}

// `outputs` chains of `length` terms, in each of `row_blocks` blocks of rows
// (see ColumnChainsKernel).
template <int kTerms, bool kLanesAlongT, typename Load, typename Fold, typename Store>
cudaError_t LaunchColumnChains(int64_t outputs, int64_t length, cudaStream_t stream, Load load,
                               Fold fold, Store store, int64_t row_blocks = 1) {
  if (outputs * row_blocks < kNarrowBelowOutputs) {
    return LaunchColumnChainsOf<kTerms, kLanesAlongT, 8, 512>(outputs, length, row_blocks, stream,
                                                              load, fold, store);
  }
  return LaunchColumnChainsOf<kTerms, kLanesAlongT, 32, 128>(outputs, length, row_blocks, stream,
                                                             load, fold, store);
}

// LaunchColumnChains<kTerms, false>'s chains cut into blocks of block_length
// t (formulas::ColumnSumBlockRows; 0: one block): each block's chains from +0
// side by side, into stream-ordered scratch, then per output and term the
// blocks' sums added in block order and stored.
template <int kTerms, typename Load, typename Fold, typename Store>
cudaError_t LaunchColumnChainsInBlocks(int64_t outputs, int64_t length, int64_t block_length,
                                       cudaStream_t stream, Load load, Fold fold, Store store) {
  if (block_length == 0 || block_length >= length) {
    return LaunchColumnChains<kTerms, false>(outputs, length, stream, load, fold, store);
  }
  if (length % block_length != 0) return cudaErrorInvalidValue;
  const int64_t blocks = length / block_length, per_term = blocks * outputs;
  return cuda::WithStreamScratch(kTerms * per_term, stream, [&](float* parts) {
    const cudaError_t err = LaunchColumnChains<kTerms, false>(
        outputs, block_length, stream, load, fold,
        [=] __device__(int64_t e, const float* acc) {
          for (int i = 0; i < kTerms; ++i) parts[i * per_term + e] = acc[i];
        },
        blocks);
    if (err != cudaSuccess) return err;
    // One thread an output and term: its few hundred threads wait on their
    // loads, so each reads kSumBatch blocks' sums before it adds them.
    constexpr int kSumBatch = 8;
    return cuda::LaunchForEach(static_cast<size_t>(outputs), stream, [=] __device__(size_t c) {
      float sums[kTerms];
      for (int i = 0; i < kTerms; ++i) {
        const float* part = parts + i * per_term + c;
        sums[i] = part[0];
        for (int64_t b0 = 1; b0 < blocks; b0 += kSumBatch) {
          float v[kSumBatch];
#pragma unroll
          for (int q = 0; q < kSumBatch; ++q)
            v[q] = b0 + q < blocks ? part[(b0 + q) * outputs] : 0.0f;
#pragma unroll
          for (int q = 0; q < kSumBatch; ++q) {
            if (b0 + q < blocks) sums[i] = sums[i] + v[q];
          }
        }
      }
      store(static_cast<int64_t>(c), sums);
    });
  });
}

}  // namespace easyscale::graph::cuda_ops
