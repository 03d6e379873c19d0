// File: worker/src/cuda/gemm_variants.h
//
// The 128x128 tiled GEMM kernel's compiled variants (slice depth BK, blocks
// per SM, warp-tiled thread layout), for the benchmark that picks the default
// and for the bit-equality tests: <16, 2, true> (GemmTiled's) and the
// row-major layout <16, 2, false>.
#pragma once

#include <cuda_runtime_api.h>

namespace easyscale::cuda {

template <int BK, int kMinBlocks, bool kWarpTiled>
cudaError_t LaunchGemmTiled(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream);

// GemmTiled's kernel (BK 16, two blocks an SM) in another block tile, kTileM x
// kTileN: 128x96 (Gemm's for products whose 128x128 tiles fill a wave badly),
// 96x128 and 128x64.
template <int kTileM, int kTileN>
cudaError_t LaunchGemmTiledShape(int M, int N, int K, const float* A, int lda, const float* B,
                                 int ldb, float* C, int ldc, bool accumulate, cudaStream_t stream);

// The general tiled kernel (tiled_gemm.cuh) in one fixed tile shape, kTileM x
// kTileN: 64x128, 128x128 and 192x128 (one block an SM from 128x128 on).
template <int kTileM, int kTileN>
cudaError_t LaunchGemmTiles(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream);

}  // namespace easyscale::cuda
