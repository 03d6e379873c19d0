// File: worker/src/cuda/gemm_variants.h
//
// The GEMM kernels' compiled variants, for the benchmark that picks the
// defaults and for the bit-equality tests: the 128x128 tiled kernel (slice
// depth BK, blocks per SM, warp-tiled thread layout), the large tiles (kTM x kTN
// block, BK), the cp.async-pipelined 128x128 kernel (slice depth BK, slices in
// the ring), and the chain kernel (kRows x 32/kRows outputs per warp, warps
// per block, chunk depth, chunks in the cp.async ring).
#pragma once

#include <cuda_runtime_api.h>

namespace easyscale::cuda {

template <int BK, int kMinBlocks, bool kWarpTiled>
cudaError_t LaunchGemmTiled(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream);

template <int kTM, int kTN, int BK>
cudaError_t LaunchGemmTiledWide(int M, int N, int K, const float* A, int lda, const float* B,
                                int ldb, float* C, int ldc, bool accumulate, cudaStream_t stream);

template <int BK, int kStages>
cudaError_t LaunchGemmPiped(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream);

template <int kRows, int kWarps, int kChunk, int kStages>
cudaError_t LaunchGemmChain(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream);

}  // namespace easyscale::cuda
