// File: worker/src/cuda/gemm_variants.h
//
// The 128x128 tiled GEMM kernel's compiled variants (slice depth BK, blocks
// per SM, warp-tiled thread layout, and a TiledOptions type for the finer
// knobs), for the benchmark that picks the default and for the bit-equality
// tests: <16, 2, true> (GemmTiled's), the row-major layout <16, 2, false>, and
// <16, 2, true, X> for each option set X below. All keep every output's single
// ascending-k fma chain, so all give the same bits.
#pragma once

#include <cuda_runtime_api.h>

namespace easyscale::cuda {

// The default knobs; a variant derives from it and overrides some.
struct TiledOptions {
  static constexpr int kPadA = 4;  // floats of padding per As k row (keep a multiple of 4)
  // A's global -> shared mapping: a warp takes 16 rows x 2 k-groups instead of
  // 8 rows x 4, so its transposed scalar stores hit 32 distinct banks.
  static constexpr bool kASwizzle = false;
  // The k step of a slice from which the next slice's shared-memory stores
  // are spread over the rest of its k loop; -1: all after the loop.
  static constexpr int kStoreFrom = -1;
  static constexpr bool kFragPrefetch = false;  // read k+1's fragments before k's fmas
  static constexpr bool kLdg = false;           // ld.global.nc for full-tile loads
  static constexpr bool kTallLanes = false;     // warp-tiled: lanes 4 wide x 8 high, warps 4x2
};
struct TiledPadA0 : TiledOptions {
  static constexpr int kPadA = 0;
};
struct TiledPadA8 : TiledOptions {
  static constexpr int kPadA = 8;
};
struct TiledASwizzle : TiledOptions {
  static constexpr bool kASwizzle = true;
};
struct TiledStoresK4 : TiledOptions {
  static constexpr int kStoreFrom = 4;
};
struct TiledStoresK8 : TiledOptions {
  static constexpr int kStoreFrom = 8;
};
struct TiledFragPrefetch : TiledOptions {
  static constexpr bool kFragPrefetch = true;
};
struct TiledLdg : TiledOptions {
  static constexpr bool kLdg = true;
};
struct TiledTallLanes : TiledOptions {
  static constexpr bool kTallLanes = true;
};
// Combinations (each proved free of spills by ptxas; swizzle with stores from
// k 8 was not).
struct TiledSwizzlePrefetch : TiledOptions {
  static constexpr bool kASwizzle = true;
  static constexpr bool kFragPrefetch = true;
};
struct TiledSwizzleStoresK4Prefetch : TiledSwizzlePrefetch {
  static constexpr int kStoreFrom = 4;
};
struct TiledSwizzleLdg : TiledOptions {
  static constexpr bool kASwizzle = true;
  static constexpr bool kLdg = true;
};
struct TiledStoresK8Ldg : TiledOptions {
  static constexpr int kStoreFrom = 8;
  static constexpr bool kLdg = true;
};

template <int BK, int kMinBlocks, bool kWarpTiled, typename Opt = TiledOptions>
cudaError_t LaunchGemmTiled(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream);

}  // namespace easyscale::cuda
