// The deterministic fp32 GEMM, in the k order of formulas::GemmOutput: each k
// block of an output is one register that runs acc = __fmaf_rn(A[i,k], B[k,j],
// acc) over the block's k ascending, from 0 or from C[i,j] (the CPU's fma
// loop), and a product with several k blocks runs each block as one z-slice of
// the grid into partial sums that one more kernel adds in block order. No
// atomics, no tensor cores; speed comes from the tiling around the chain.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "cp_async.cuh"
#include "cuda_kernels.h"
#include "easyscale/worker/kernel_formulas.h"
#include "launch.cuh"
#include "stream_scratch.h"
#include "tiled_gemm.cuh"

namespace easyscale::cuda {
namespace {

using formulas::kGemmKBlock;

// A product as a kernel sees it: out[i,j] = the chain over k of A[i,k]*B[k,j]
// from init[i,j] (from 0 without init).
struct GemmArgs {
  int M, N, K;
  const float* A;
  int lda;
  const float* B;
  int ldb;
  const float* init;
  int ldi;
  float* out;
  int ldo;
  // A batched product (GemmBatched: one k block, grid z-slice z is entry z):
  // the steps between entries of A, B and out (and init); 0 otherwise.
  size_t batch_a = 0, batch_b = 0, batch_o = 0;
  // GemmBias's: out[i,j] = chain + bias[j] (a product of one k block); null
  // otherwise.
  const float* bias = nullptr;
};

// This thread block's part of a k-blocked product: grid z-slice z runs k block z
// into partial sums [blocks][M][N] (the caller points out at them); only block
// 0 starts from init.
__device__ __forceinline__ GemmArgs KBlockOf(GemmArgs g) {
  if (gridDim.z == 1) return g;
  const int z = static_cast<int>(blockIdx.z);
  if (g.batch_o != 0) {  // batch entry z
    g.A += z * g.batch_a;
    g.B += z * g.batch_b;
    if (g.init != nullptr) g.init += z * g.batch_o;
    g.out += z * g.batch_o;
    return g;
  }
  const int k0 = z * kGemmKBlock;
  g.A += k0;
  g.B += static_cast<size_t>(k0) * g.ldb;
  g.K = min(kGemmKBlock, g.K - k0);
  if (z > 0) g.init = nullptr;
  g.out += static_cast<size_t>(z) * g.M * g.N;
  return g;
}

// GemmBatchedStrided's batch in two levels: entry z is entry z % batch_inner
// of group z / batch_inner, batch_* (GemmArgs's) the steps between groups and
// inner_* those between a group's entries. A type of its own, so the kernels
// of one-level batches keep their registers (the 128x128 ones spilled with
// these fields in GemmArgs).
struct GemmGroupedArgs : GemmArgs {
  int batch_inner = 1;
  size_t inner_a = 0, inner_b = 0, inner_o = 0;
};

__device__ __forceinline__ GemmGroupedArgs KBlockOf(GemmGroupedArgs g) {
  const int z = static_cast<int>(blockIdx.z);
  const size_t group = static_cast<size_t>(z / g.batch_inner), entry = z % g.batch_inner;
  g.A += group * g.batch_a + entry * g.inner_a;
  g.B += group * g.batch_b + entry * g.inner_b;
  const size_t o = group * g.batch_o + entry * g.inner_o;
  if (g.init != nullptr) g.init += o;
  g.out += o;
  return g;
}

// The tiled kernel's operand moves. A matrix's four consecutive elements
// (i, j..j+3) at p[i * ld + j] as a float4 (one 16-byte load when `full`:
// aligned and all inside), zeros past `rows` or `cols`.
__device__ __forceinline__ float4 AlongFirst(const float* p, int ld, int i, int rows, int j,
                                             int cols, bool full) {
  const float* src = p + static_cast<size_t>(i) * ld + j;
  if (full) return *reinterpret_cast<const float4*>(src);
  const bool row_ok = i < rows;
  return make_float4(row_ok && j < cols ? src[0] : 0.0f, row_ok && j + 1 < cols ? src[1] : 0.0f,
                     row_ok && j + 2 < cols ? src[2] : 0.0f,
                     row_ok && j + 3 < cols ? src[3] : 0.0f);
}
// Into a k-major slice (row k at slice + k * ld): four consecutive elements
// of slice row k as one float4, or one element of four consecutive rows k..k+3.
__device__ __forceinline__ void StoreAlongSlice(float* slice, int ld, int k, int i, float4 v) {
  *reinterpret_cast<float4*>(&slice[k * ld + i]) = v;
}
__device__ __forceinline__ void StoreAcrossSlice(float* slice, int ld, int i, int k, float4 v) {
  slice[(k + 0) * ld + i] = v.x;
  slice[(k + 1) * ld + i] = v.y;
  slice[(k + 2) * ld + i] = v.z;
  slice[(k + 3) * ld + i] = v.w;
}

// Entry i of a thread's register tile along a kTile-wide block tile, t the
// thread's row ty or column tx: 4x4 sub-tiles 64 apart, and in a tile of 64p +
// 32 (96) a last strip of two at 64p + 2t.
template <int kTile>
__device__ __forceinline__ int RegisterTileOffset(int t, int i) {
  constexpr int kWhole = kTile / 64 * 4;  // entries in whole sub-tiles
  return i < kWhole ? t * 4 + i % 4 + (i / 4) * 64 : kTile / 64 * 64 + t * 2 + (i - kWhole);
}
// A thread's kTile / 16 entries of one k row of a slice (16-byte aligned):
// a float4 a sub-tile, a float2 for the strip.
template <int kTile>
__device__ __forceinline__ void ReadRegisterTile(const float* row, int t, float (&v)[kTile / 16]) {
#pragma unroll
  for (int q = 0; q < kTile / 64; ++q) {
    const float4 f = *reinterpret_cast<const float4*>(&row[q * 64 + t * 4]);
    v[q * 4 + 0] = f.x, v[q * 4 + 1] = f.y, v[q * 4 + 2] = f.z, v[q * 4 + 3] = f.w;
  }
  if constexpr (kTile % 64 == 32) {
    const float2 f = *reinterpret_cast<const float2*>(&row[kTile / 64 * 64 + t * 2]);
    v[kTile / 64 * 4] = f.x, v[kTile / 64 * 4 + 1] = f.y;
  }
}

// The tiled kernel: a 128x128 block tile, 256 threads with an 8x8 register tile
// each (as 4x4 sub-tiles 64 rows or columns apart, so the shared-memory reads
// are 16-byte vectors without bank conflicts), and a BK-deep k slice
// double-buffered in shared memory: the next slice is read from global memory
// into registers while the current one is multiplied. A is stored k-major
// (transposed) in shared memory so a thread reads its A values as float4s.
constexpr int kTileM = 128;
constexpr int kTileN = 128;
constexpr int kTiledThreads = 256;
constexpr int kPadA = 4;  // keeps float4 alignment, shifts banks between k rows

template <int BK, int kTM = kTileM, int kTN = kTileN>
constexpr int TiledSharedBytes() {
  return 2 * BK * (kTM + kPadA + kTN) * static_cast<int>(sizeof(float));
}

// kATransposed: A's element (r, k) is at A[k * lda + r] (a stored A^T, read
// along r into the k-major slice as float4s); kBTransposed: B's (k, n) at
// B[n * ldb + k] (read along k, stored k-major): MatMul's gradients read their
// operands so instead of copying them transposed first.
// kTM x kTN: the block tile (64, 96 or 128 each; a batch of products 64 wide
// takes 64 of them instead of computing padding, see LaunchGemmBatched; a
// product 768 wide, 96-column tiles that fill a wave, see Gemm).
// kBias: adds args.bias[c] to each output as it stores it (GemmBias; a
// template flag, so that the other instantiations keep their registers: a
// runtime test spilled the 128x128 ones).
// Args: GemmArgs, or GemmGroupedArgs for a batch in two levels.
template <int BK, int kMinBlocks, bool kWarpTiled, bool kATransposed = false,
          bool kBTransposed = false, int kTM = kTileM, int kTN = kTileN, bool kBias = false,
          class Args = GemmArgs>
__global__ void __launch_bounds__(kTiledThreads, kMinBlocks)
    GemmTiledKernel(const Args args, bool vector_ok) {
  constexpr int kTileM = kTM, kTileN = kTN;  // this launch's tile
  static_assert(kTileM % 32 == 0 && kTileM >= 64 && kTileN % 32 == 0 && kTileN >= 64,
                "the register tile is 4x4 sub-tiles 64 apart and a strip of 2");
  static_assert(BK % 4 == 0, "slices move as float4s");
  // A slice's float4s, and each thread's share of them (the last share of a
  // 96-wide tile's only half the threads').
  constexpr int kAFloat4s = kTileM * BK / 4, kBFloat4s = kTileN * BK / 4;
  constexpr int kAVec = (kAFloat4s + kTiledThreads - 1) / kTiledThreads;
  constexpr int kBVec = (kBFloat4s + kTiledThreads - 1) / kTiledThreads;
  constexpr int kRM = kTileM / 16, kRN = kTileN / 16;  // the thread's register tile
  constexpr int kLdA = kTileM + kPadA;
  const Args g = KBlockOf(args);
  const int M = g.M, N = g.N, K = g.K, lda = g.lda, ldb = g.ldb;
  const float* __restrict__ const A = g.A;
  const float* __restrict__ const B = g.B;
  extern __shared__ __align__(16) float tiled_smem[];
  float* const As = tiled_smem;                  // [2][BK][kLdA]
  float* const Bs = tiled_smem + 2 * BK * kLdA;  // [2][BK][kTileN]

  const int tid = threadIdx.x;
  // The 16x16 thread grid: row-major, or with each warp on an 8x4 patch of it
  // (fewer distinct shared-memory vectors per warp read).
  const int warp = tid / 32, lane = tid % 32;
  const int tx = kWarpTiled ? (warp % 2) * 8 + lane % 8 : tid % 16;
  const int ty = kWarpTiled ? (warp / 2) * 4 + lane / 8 : tid / 16;
  const int m0 = blockIdx.y * kTileM, n0 = blockIdx.x * kTileN;
  float4 ra[kAVec], rb[kBVec];

  auto load_slice = [&](int k0) {
    const bool full = vector_ok && m0 + kTileM <= M && n0 + kTileN <= N && k0 + BK <= K;
#pragma unroll
    for (int v = 0; v < kAVec; ++v) {
      const int idx = tid + v * kTiledThreads;
      if (kAFloat4s % kTiledThreads != 0 && idx >= kAFloat4s) break;
      if constexpr (kATransposed) {
        ra[v] =
            AlongFirst(A, lda, k0 + idx / (kTileM / 4), K, m0 + (idx % (kTileM / 4)) * 4, M, full);
      } else {
        ra[v] = AlongFirst(A, lda, m0 + idx / (BK / 4), M, k0 + (idx % (BK / 4)) * 4, K, full);
      }
    }
#pragma unroll
    for (int v = 0; v < kBVec; ++v) {
      const int idx = tid + v * kTiledThreads;
      if (kBFloat4s % kTiledThreads != 0 && idx >= kBFloat4s) break;
      if constexpr (kBTransposed) {
        rb[v] = AlongFirst(B, ldb, n0 + idx / (BK / 4), N, k0 + (idx % (BK / 4)) * 4, K, full);
      } else {
        rb[v] =
            AlongFirst(B, ldb, k0 + idx / (kTileN / 4), K, n0 + (idx % (kTileN / 4)) * 4, N, full);
      }
    }
  };
  auto store_slice = [&](int buf) {
    float* const as = As + buf * BK * kLdA;
    float* const bs = Bs + buf * BK * kTileN;
#pragma unroll
    for (int v = 0; v < kAVec; ++v) {
      const int idx = tid + v * kTiledThreads;
      if (kAFloat4s % kTiledThreads != 0 && idx >= kAFloat4s) break;
      if constexpr (kATransposed) {
        StoreAlongSlice(as, kLdA, idx / (kTileM / 4), (idx % (kTileM / 4)) * 4, ra[v]);
      } else {
        StoreAcrossSlice(as, kLdA, idx / (BK / 4), (idx % (BK / 4)) * 4, ra[v]);
      }
    }
#pragma unroll
    for (int v = 0; v < kBVec; ++v) {
      const int idx = tid + v * kTiledThreads;
      if (kBFloat4s % kTiledThreads != 0 && idx >= kBFloat4s) break;
      if constexpr (kBTransposed) {
        StoreAcrossSlice(bs, kTileN, idx / (BK / 4), (idx % (BK / 4)) * 4, rb[v]);
      } else {
        StoreAlongSlice(bs, kTileN, idx / (kTileN / 4), (idx % (kTileN / 4)) * 4, rb[v]);
      }
    }
  };

  // Row i of the register tile is global row m0 + RegisterTileOffset(ty, i),
  // and likewise for columns with tx.
  float acc[kRM][kRN];
#pragma unroll
  for (int i = 0; i < kRM; ++i) {
    const int r = m0 + RegisterTileOffset<kTileM>(ty, i);
#pragma unroll
    for (int j = 0; j < kRN; ++j) {
      const int c = n0 + RegisterTileOffset<kTileN>(tx, j);
      acc[i][j] =
          g.init != nullptr && r < M && c < N ? g.init[static_cast<size_t>(r) * g.ldi + c] : 0.0f;
    }
  }

  auto multiply_k = [&](int buf, int kk) {
    const float* const as = As + (buf * BK + kk) * kLdA;
    const float* const bs = Bs + (buf * BK + kk) * kTileN;
    float a[kRM], b[kRN];
    ReadRegisterTile<kTileM>(as, ty, a);
    ReadRegisterTile<kTileN>(bs, tx, b);
    // Column by column: consecutive fmas share b[j], which the operand reuse
    // cache then serves, so fewer of them wait on a register bank (0.912 of
    // cuBLAS at 4096^3 against 0.888 row by row; a serpentine order, 0.81).
#pragma unroll
    for (int j = 0; j < kRN; ++j) {
#pragma unroll
      for (int i = 0; i < kRM; ++i) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
    }
  };

  const int slices = (K + BK - 1) / BK;
  if (slices > 0) {
    load_slice(0);
    store_slice(0);
    __syncthreads();
  }
  for (int s = 0; s < slices; ++s) {
    const int buf = s & 1;
    if (s + 1 < slices) load_slice((s + 1) * BK);
    const int valid = K - s * BK;
    if (valid >= BK) {
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) multiply_k(buf, kk);
    } else {
      // The last, partial slice: only real k, so no fma with padding zeros
      // (which could turn a -0 into +0).
      for (int kk = 0; kk < valid; ++kk) multiply_k(buf, kk);
    }
    if (s + 1 < slices) store_slice(buf ^ 1);
    __syncthreads();  // one barrier: the other buffer's readers finished last round
  }

#pragma unroll
  for (int i = 0; i < kRM; ++i) {
    const int r = m0 + RegisterTileOffset<kTileM>(ty, i);
    if (r >= M) continue;
#pragma unroll
    for (int j = 0; j < kRN; ++j) {
      const int c = n0 + RegisterTileOffset<kTileN>(tx, j);
      if (c < N)
        g.out[static_cast<size_t>(r) * g.ldo + c] = kBias ? acc[i][j] + g.bias[c] : acc[i][j];
    }
  }
}

// One thread per output column and kRowsPer rows: for shapes too thin for a
// 128x128 tile (the model's conv layers have 8 or 16 output channels). A[i,k]
// is a broadcast, B[k,j] a coalesced row read, used for kRowsPer chains.
// kATransposed / kBTransposed as GemmTiledKernel's.
template <int kRowsPer, bool kATransposed = false, bool kBTransposed = false, class Args = GemmArgs>
__global__ void GemmPerOutputKernel(const Args args) {
  const Args g = KBlockOf(args);
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= g.N) return;
  for (int i0 = blockIdx.y * kRowsPer; i0 < g.M; i0 += gridDim.y * kRowsPer) {
    // Rows past M repeat row M-1 (a valid address) and are not stored.
    const float* __restrict__ a[kRowsPer];
    float acc[kRowsPer];
#pragma unroll
    for (int r = 0; r < kRowsPer; ++r) {
      const int i = min(i0 + r, g.M - 1);
      a[r] = kATransposed ? g.A + i : g.A + static_cast<size_t>(i) * g.lda;
      acc[r] = g.init != nullptr ? g.init[static_cast<size_t>(i) * g.ldi + j] : 0.0f;
    }
    const float* __restrict__ b = kBTransposed ? g.B + static_cast<size_t>(j) * g.ldb : g.B + j;
    const size_t a_step = kATransposed ? g.lda : 1, b_step = kBTransposed ? 1 : g.ldb;
#pragma unroll 8
    for (int k = 0; k < g.K; ++k) {
      const float bk = b[static_cast<size_t>(k) * b_step];
#pragma unroll
      for (int r = 0; r < kRowsPer; ++r) acc[r] = __fmaf_rn(a[r][k * a_step], bk, acc[r]);
    }
#pragma unroll
    for (int r = 0; r < kRowsPer; ++r) {
      if (i0 + r < g.M) g.out[static_cast<size_t>(i0 + r) * g.ldo + j] = acc[r];
    }
  }
}

// Adds the k blocks' partial sums [blocks][M][N] in block order into C.
__global__ void GemmSumKBlocksKernel(int M, int N, int blocks, const float* __restrict__ parts,
                                     float* __restrict__ C, int ldc) {
  const size_t count = static_cast<size_t>(M) * N;
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float sum = parts[e];
    for (int b = 1; b < blocks; ++b) sum = sum + parts[b * count + e];
    C[e / N * ldc + e % N] = sum;
  }
}

// The chain kernel, for few outputs and a long K (the weight gradients): one
// output per thread, and the chain kept at the fma latency by feeding it float4s
// along k. A warp owns a kRows x (32/kRows) output patch, so per 4 k it reads
// one A and one B float4 from shared memory (A rows and B columns stored
// k-contiguous); a block of kWarps warps side by side along n copies its A rows
// and B columns with cp.async through a kStages-deep ring of kChunk-deep
// chunks, so several chunks are in flight during the chain. Each thread's
// copies for a later chunk are interleaved with the fmas of the current one
// (straight-line code), filling the issue slots the chain leaves idle.
// Single-warp blocks spread the few outputs over many SMs. kAVector: 16-byte
// copies of A (rows 16-byte aligned).
template <int kRows, int kWarps, int kChunk, int kStages, bool kAVector>
__global__ void __launch_bounds__(32 * kWarps) GemmChainKernel(const GemmArgs args) {
  static_assert(32 % kRows == 0 && kChunk % 8 == 0 && kStages >= 2, "chain tile shape");
  constexpr int kCols = 32 / kRows;  // a warp's columns
  constexpr int kBlockN = kCols * kWarps;
  constexpr int kThreads = 32 * kWarps;
  constexpr int kStride = kChunk + 4;  // = 4 mod 8: rows 16 bytes apart in the banks
  constexpr int kSteps = kChunk / 4;   // float4 steps per chunk
  // A thread's copies of a chunk: A's at one k offset, rows kARowStep apart (16
  // bytes each with kAVector, else 4); B's in one column, k kBKStep apart (B is
  // read row by row, coalesced, and stored k-contiguous per column). Fixed
  // strides, so a copy costs an address add and the cp.async.
  constexpr int kAWidth = kAVector ? 4 : 1;
  constexpr int kAPerRow = kChunk / kAWidth;
  static_assert(kThreads % kAPerRow == 0 && kRows % (kThreads / kAPerRow) == 0 &&
                    kThreads % kBlockN == 0 && kChunk % (kThreads / kBlockN) == 0,
                "copies must tile the chunk");
  constexpr int kARowStep = kThreads / kAPerRow, kAOps = kRows / kARowStep;
  constexpr int kBKStep = kThreads / kBlockN, kBOps = kChunk / kBKStep;
  constexpr int kOps = kAOps + kBOps;
  __shared__ __align__(16) float As[kStages][kRows][kStride];
  __shared__ __align__(16) float Bs[kStages][kBlockN][kStride];
  const GemmArgs g = KBlockOf(args);
  const int M = g.M, N = g.N, K = g.K, lda = g.lda, ldb = g.ldb;
  const float* __restrict__ const A = g.A;
  const float* __restrict__ const B = g.B;

  const int tid = threadIdx.x, lane = tid % 32;
  const int r = lane / kCols, c = (tid / 32) * kCols + lane % kCols;
  const int m0 = blockIdx.y * kRows, n0 = blockIdx.x * kBlockN;

  // Rows and columns past the matrix copy nothing (zero fill) from a clamped,
  // valid address.
  const int a_row = tid / kAPerRow, a_k = (tid % kAPerRow) * kAWidth;
  const int b_col = tid % kBlockN, b_k = tid / kBlockN;
  const float* const a_src = A + static_cast<size_t>(min(m0 + a_row, M - 1)) * lda + a_k;
  const float* const b_src = B + static_cast<size_t>(b_k) * ldb + min(n0 + b_col, N - 1);
  const size_t a_step = static_cast<size_t>(kARowStep) * lda;
  const size_t b_step = static_cast<size_t>(kBKStep) * ldb;
  bool a_row_ok[kAOps];
#pragma unroll
  for (int i = 0; i < kAOps; ++i) a_row_ok[i] = m0 + a_row + i * kARowStep < M;
  const bool b_col_ok = n0 + b_col < N;

  // Copy i of the chunk at k0 into buffer buf. kInside: the whole chunk lies
  // inside K, so no k needs checking.
  auto copy = [&](auto inside, int i, int buf, int k0) {
    constexpr bool kInside = decltype(inside)::value;
    if (i < kAOps) {
      float* d = &As[buf][a_row + i * kARowStep][a_k];
      const float* src = a_src + k0 + i * a_step;
      if (kAVector) {
        const int bytes = !a_row_ok[i] ? 0 : kInside ? 16 : 4 * max(0, min(4, K - k0 - a_k));
        CpAsync16(d, kInside || bytes > 0 ? src : A, bytes);
      } else {
        const bool ok = a_row_ok[i] && (kInside || k0 + a_k < K);
        CpAsync4(d, kInside || ok ? src : A, ok);
      }
    } else {
      const int j = i - kAOps;
      float* d = &Bs[buf][b_col][b_k + j * kBKStep];
      const float* src = b_src + static_cast<size_t>(k0) * ldb + j * b_step;
      const bool ok = b_col_ok && (kInside || k0 + b_k + j * kBKStep < K);
      CpAsync4(d, kInside || ok ? src : B, ok);
    }
  };
  const std::true_type kInsideK;
  const std::false_type kMayPassK;

  const int m = m0 + r, n = n0 + c;
  const bool mine = m < M && n < N;
  float acc = g.init != nullptr && mine ? g.init[static_cast<size_t>(m) * g.ldi + n] : 0.0f;
  const int chunks = (K + kChunk - 1) / kChunk;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) {
#pragma unroll
      for (int i = 0; i < kOps; ++i) copy(kMayPassK, i, s, s * kChunk);
    }
    CpAsyncCommit();  // empty groups too, so the wait count below stays exact
  }
  for (int s = 0; s < chunks; ++s) {
    CpAsyncWait<kStages - 2>();  // this thread's copies of chunk s landed
    // Everyone's copies landed, and everyone is done with chunk s-1.
    if constexpr (kWarps == 1) {
      __syncwarp();
    } else {
      __syncthreads();
    }
    const int next = s + kStages - 1, next_buf = next % kStages;  // chunk s-1's buffer
    const int buf = s % kStages, valid = min(kChunk, K - s * kChunk);
    const float* a = &As[buf][r][0];
    const float* b = &Bs[buf][c][0];
    // A full chunk: its fmas, with the copies of chunk `next` (if any) spread
    // among them.
    auto full_chunk = [&](auto inside, bool copies) {
#pragma unroll
      for (int q = 0; q < kSteps; ++q) {
        const float4 av = *reinterpret_cast<const float4*>(a + 4 * q);
        const float4 bv = *reinterpret_cast<const float4*>(b + 4 * q);
        if (copies) {
#pragma unroll
          for (int i = 0; i < kOps; ++i) {
            if (i * kSteps / kOps == q) copy(inside, i, next_buf, next * kChunk);
          }
        }
        acc = __fmaf_rn(av.x, bv.x, acc);
        acc = __fmaf_rn(av.y, bv.y, acc);
        acc = __fmaf_rn(av.z, bv.z, acc);
        acc = __fmaf_rn(av.w, bv.w, acc);
      }
    };
    if (valid == kChunk && (next + 1) * kChunk <= K) {
      full_chunk(kInsideK, true);
    } else if (valid == kChunk && next < chunks) {
      full_chunk(kMayPassK, true);
    } else if (valid == kChunk) {
      full_chunk(kInsideK, false);
    } else {
      // The last chunk (so nothing left to copy): real k only.
      for (int kk = 0; kk < valid; ++kk) acc = __fmaf_rn(a[kk], b[kk], acc);
    }
    CpAsyncCommit();
  }
  CpAsyncWait<0>();  // no copy outlives the block
  if (mine) g.out[static_cast<size_t>(m) * g.ldo + n] = acc;
}

bool ValidShape(int M, int N, int K, int lda, int ldb, int ldc) {
  return M >= 0 && N >= 0 && K >= 0 && lda >= K && ldb >= N && ldc >= N;
}

// Validates the shape and runs launch(args, z) for it, z the grid's depth: 1
// when K fits one k block; else one z-slice per k block into partial sums
// (stream-ordered scratch, so it is captured into a CUDA graph too), then their
// sum in block order into C.
template <typename Launch>
cudaError_t RunGemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
                    int ldc, bool accumulate, cudaStream_t stream, Launch launch) {
  if (!ValidShape(M, N, K, lda, ldb, ldc)) return cudaErrorInvalidValue;
  if (M == 0 || N == 0) return cudaSuccess;
  const GemmArgs g{M, N, K, A, lda, B, ldb, accumulate ? C : nullptr, ldc, C, ldc};
  const int blocks = tiled::KBlocks(K);
  if (blocks == 1) return launch(g, 1);
  if (blocks > 65535) return cudaErrorInvalidValue;
  return WithStreamScratch(static_cast<size_t>(M) * N * blocks, stream, [&](float* parts) {
    GemmArgs split = g;
    split.out = parts;
    split.ldo = N;
    const cudaError_t err = launch(split, blocks);
    return err == cudaSuccess ? SumParts(M, N, blocks, parts, C, ldc, stream) : err;
  });
}

// One host thread queues a step's lanes, each on its own stream.
thread_local int side_by_side_streams = 1;

}  // namespace

void SetSideBySideStreams(int streams) { side_by_side_streams = std::max(streams, 1); }
int SideBySideStreams() { return side_by_side_streams; }

cudaError_t SumParts(int M, int N, int blocks, const float* parts, float* C, int ldc,
                     cudaStream_t stream) {
  const size_t count = static_cast<size_t>(M) * N;
  const auto grid = static_cast<unsigned>(
      std::min<size_t>((count + tiled::kThreads - 1) / tiled::kThreads, 4096));
  GemmSumKBlocksKernel<<<grid, tiled::kThreads, 0, stream>>>(M, N, blocks, parts, C, ldc);
  return cudaGetLastError();
}

// The slice depth, occupancy and thread layout picked by bench/cuda/gemm_bench on the H200.
// Measured slower there at 4096^3 (of cuBLAS's 51.1 TF/s; this one 0.909-0.912): BK=8 (~0.80), 1
// block per SM (0.80; these with fmas row by row, 0.888 then), cp.async-pipelined 128x128 slices
// (0.67-0.87), 128x256 and 256x128 tiles (0.81-0.84, 0.67-0.78), thread-block swizzles of 4-16 tile
// rows (0.85), As padding 0 / 8 (0.82 / 0.888), bank-swizzled A stores (0.77), next-slice stores
// spread over the k loop (0.87-0.88), fragment prefetch (0.886), __ldg loads (0.87), 4x8 lanes in
// 4x2 warps (0.88), A packed k-major first (43 us at 4096^2) for cp.async rings on both operands
// (128x128: 0.83-0.84, 256x128: 0.85-0.88, 128x256: 0.82; 2026-12-02 21:47 UTC, also row by row);
// at long K, an 8x32 tile staged through shared memory lost to the chain; for few rows, one thread
// per column of 8 outputs (A broadcast) lost to one per output at K = 200 (52 against 12 us, conv2
// forward at batch 64) and won by under 2 us at K <= 25 (kStripRows), and so did a 16-row strip per
// thread with A staged in shared memory (21.7 against 11.2 us there); for the chain kernel,
// separate copy warps (44 against 28 us, conv1 dW at batch 64).
constexpr int kTiledBK = 16;
constexpr int kTiledMinBlocks = 2;
constexpr bool kTiledWarpTiled = true;
// The chain kernel's warp patch, warps per block, chunk depth and ring depth.
constexpr int kChainRows = 8;
constexpr int kChainWarps = 2;  // <8,2,64,6>: fastest chain at batch 16, 64 and 128 on the H200
constexpr int kChainChunk = 64;
constexpr int kChainStages = 6;
// Gemm's dispatch thresholds, from the same benchmark's model shapes.
// The chain kernel beat one thread per output (19:12 UTC run) for every k block
// of 512 or more, and from 32 on where the outputs number at most 32768 (the
// fully connected layers, conv2 forward at batch 16); one thread per output won
// for more outputs with a short K (conv1 and conv2 forward at batch 64 and up).
constexpr int64_t kMinTiledBlocks = 64;
constexpr int kChainMinK = 512;
constexpr int kChainShortMinK = 32;
constexpr int64_t kChainShortMaxOutputs = 32768;
// 4-row strips beat one thread per output for K < 32 from about 2^17 outputs
// (conv1 forward and its input gradient at batch 64 and 128: 4.8 against 6.4 us
// and 5.2 against 7.1 at batch 64, 21:58 UTC) and lost at K = 200 (16.2 against
// 9.0: four scalar A loads per k).
constexpr int kStripRows = 4;
constexpr int64_t kStripMinOutputs = 1 << 17;

// 192x128 tiles (one block an SM) against GemmTiled's 128x128 (two): an SM's
// rate of output in them, relative (gemm_bench's tile-shape table on an H100,
// issue 19 run 19: a wave of 192x128 tiles at K = 768 took 0.89 of a wave of
// two 128x128 blocks an SM for 0.75 of the outputs; 4096^3, 4.0 against 2.9
// ms, is 0.73 with its 5.3 waves run in 6).
constexpr double kTallTileRate = 0.82;
// 128x96 tiles (two blocks an SM, as 128x128) against 128x128: likewise, an
// SM's rate of output in them, relative (gemm_bench's tile-shape table on an
// H100, issue 19 run 23: 0.89-0.90 at the encoder's 4096-row products, e.g.
// 4096x768x3072 in 463.8 against 555.7 us; 0.81 at 4096^3).
constexpr double kNarrowTileRate = 0.9;

namespace {
// Whether `batch` M x N products' 128x128 tiles, as many again on each stream
// running side by side, reach kMinTiledBlocks.
bool ManyTiles(int M, int N, int batch) {
  return tiled::TileBlocks(M, N, batch, kTileM, kTileN) * SideBySideStreams() >= kMinTiledBlocks;
}

int SmCount() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  return sms;
}

// The block tile that ends an M x N product of z k blocks soonest: the
// busiest SM's share of tiles, in 128x128 tiles' time at two blocks an SM (a
// lone 128x128 block, one; a 128x96 one, 0.75 / kNarrowTileRate; a 192x128
// one, at one block an SM, 1.5 / kTallTileRate). A 768-column product of
// 4096 rows is 192 of 128x128 tiles, two on some of an H100's 132 SMs, 256 of
// 128x96 (two on most) or 132 of 192x128 (one each; on an H100 120.5 against
// 143.2 us at K = 768; in 128x96, 121.1). Where streams run side by side
// (lanes, or a gradient beside another), their products fill the SMs too: a
// 192x128 block's registers leave no room for theirs (the encoder's MatMul
// backward 37.1 -> 40.5 ms a step), and 128x96 tiles beside the weight
// gradients gained nothing (35.19 -> 35.31 ms, run 23): 128x128 there.
enum class BlockTile { k128x128, k128x96, k192x128 };
BlockTile SoonestTile(int M, int N, int z) {
  const int64_t sms = SmCount();
  if (sms == 0 || SideBySideStreams() > 1) return BlockTile::k128x128;
  const auto busiest = [&](int tile_m, int tile_n) {
    return static_cast<double>((tiled::TileBlocks(M, N, z, tile_m, tile_n) + sms - 1) / sms);
  };
  BlockTile best = BlockTile::k128x128;
  double soonest = busiest(kTileM, kTileN);
  const double narrow = 0.75 / kNarrowTileRate * busiest(kTileM, 96);
  if (narrow < soonest) best = BlockTile::k128x96, soonest = narrow;
  if (1.5 / kTallTileRate * busiest(192, kTileN) < soonest) best = BlockTile::k192x128;
  return best;
}

// The block tile of the tiled kernel, where Gemm takes it for an M x N x K
// product (its tiles mostly real and filling the chip); else nullopt.
std::optional<BlockTile> TiledBlockTile(int M, int N, int K) {
  if (M < kTileM / 2 || N < kTileN / 2 || !ManyTiles(M, N, 1)) return std::nullopt;
  return SoonestTile(M, N, tiled::KBlocks(K));
}

// kBias: with GemmBias's bias (only for a product of one k block).
template <int BK, int kMinBlocks, bool kWarpTiled, int kTM, int kTN, bool kBias = false>
cudaError_t LaunchTiled(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                        float* C, int ldc, bool accumulate, cudaStream_t stream,
                        const float* bias = nullptr) {
  // k blocks start at multiples of kGemmKBlock, so they keep A's and B's alignment.
  const bool vector_ok = lda % 4 == 0 && ldb % 4 == 0 && Aligned16(A) && Aligned16(B);
  return RunGemm(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream, [&](GemmArgs g, int z) {
    g.bias = bias;
    const dim3 grid((N + kTN - 1) / kTN, (M + kTM - 1) / kTM, z);
    if (grid.y > 65535) return cudaErrorInvalidValue;
    constexpr int kBytes = TiledSharedBytes<BK, kTM, kTN>();
    static_assert(kBytes <= 48 * 1024, "more would need the per-device opt-in");
    GemmTiledKernel<BK, kMinBlocks, kWarpTiled, false, false, kTM, kTN, kBias>
        <<<grid, kTiledThreads, kBytes, stream>>>(g, vector_ok);
    return cudaGetLastError();
  });
}
}  // namespace

template <int BK, int kMinBlocks, bool kWarpTiled>
cudaError_t LaunchGemmTiled(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream) {
  return LaunchTiled<BK, kMinBlocks, kWarpTiled, kTileM, kTileN>(M, N, K, A, lda, B, ldb, C, ldc,
                                                                 accumulate, stream);
}
// The default and, for gemm_bench, the row-major thread layout.
template cudaError_t LaunchGemmTiled<16, 2, false>(int, int, int, const float*, int, const float*,
                                                   int, float*, int, bool, cudaStream_t);
template cudaError_t LaunchGemmTiled<16, 2, true>(int, int, int, const float*, int, const float*,
                                                  int, float*, int, bool, cudaStream_t);

template <int kRows, int kWarps, int kChunk, int kStages>
cudaError_t LaunchGemmChain(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream) {
  const bool a_vector = lda % 4 == 0 && Aligned16(A);
  return RunGemm(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream,
                 [&](const GemmArgs& g, int z) {
                   constexpr int kBlockN = 32 / kRows * kWarps;
                   const dim3 grid((N + kBlockN - 1) / kBlockN, (M + kRows - 1) / kRows, z);
                   if (grid.y > 65535) return cudaErrorInvalidValue;
                   if (a_vector) {
                     GemmChainKernel<kRows, kWarps, kChunk, kStages, true>
                         <<<grid, 32 * kWarps, 0, stream>>>(g);
                   } else {
                     GemmChainKernel<kRows, kWarps, kChunk, kStages, false>
                         <<<grid, 32 * kWarps, 0, stream>>>(g);
                   }
                   return cudaGetLastError();
                 });
}

cudaError_t GemmTiled(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                      float* C, int ldc, bool accumulate, cudaStream_t stream) {
  return LaunchGemmTiled<kTiledBK, kTiledMinBlocks, kTiledWarpTiled>(M, N, K, A, lda, B, ldb, C,
                                                                     ldc, accumulate, stream);
}

template <int kTM, int kTN>
cudaError_t LaunchGemmTiledShape(int M, int N, int K, const float* A, int lda, const float* B,
                                 int ldb, float* C, int ldc, bool accumulate, cudaStream_t stream) {
  return LaunchTiled<kTiledBK, kTiledMinBlocks, kTiledWarpTiled, kTM, kTN>(
      M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
}
template cudaError_t LaunchGemmTiledShape<128, 96>(int, int, int, const float*, int, const float*,
                                                   int, float*, int, bool, cudaStream_t);
template cudaError_t LaunchGemmTiledShape<96, 128>(int, int, int, const float*, int, const float*,
                                                   int, float*, int, bool, cudaStream_t);
template cudaError_t LaunchGemmTiledShape<128, 64>(int, int, int, const float*, int, const float*,
                                                   int, float*, int, bool, cudaStream_t);

cudaError_t GemmChain(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                      float* C, int ldc, bool accumulate, cudaStream_t stream) {
  return LaunchGemmChain<kChainRows, kChainWarps, kChainChunk, kChainStages>(
      M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
}

namespace {
// A dense product in the general tiled kernel, in the shape `tiles` gives.
template <class Tiles>
cudaError_t DenseTiled(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                       float* C, int ldc, bool accumulate, cudaStream_t stream, Tiles tiles) {
  if (!ValidShape(M, N, K, lda, ldb, ldc)) return cudaErrorInvalidValue;
  if (tiled::KBlocks(K) > 65535) return cudaErrorInvalidValue;
  // k blocks start at multiples of kGemmKBlock, so they keep A's and B's alignment.
  const bool vector_ok = lda % 4 == 0 && ldb % 4 == 0 && Aligned16(A) && Aligned16(B);
  return tiled::RunTiledDense<1>(  // one block an SM for tiles of 128x128 and more
      M, N, K,
      [&](auto tm) {
        return tiled::RowsSource<tm, tiled::RegisterSlices>{A, lda, M, 0, vector_ok};
      },
      [&](auto tn) {
        return tiled::ColumnsOfRowsSource<tn, tiled::RegisterSlices>{B, ldb, N, vector_ok};
      },
      C, ldc, accumulate, stream, formulas::kGemmKBlock, tiles);
}
}  // namespace

cudaError_t GemmFillTiles(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                          float* C, int ldc, bool accumulate, cudaStream_t stream) {
  // 128x128 tiles: GemmTiled's kernel, at two blocks an SM (the general one
  // needs 162 registers a thread with these sources: one block).
  if (ValidShape(M, N, K, lda, ldb, ldc) && tiled::WideTiles(M, N, tiled::KBlocks(K)))
    return GemmTiled(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
  return DenseTiled(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream, tiled::ChosenTiles{});
}

template <int kTileM, int kTileN>
cudaError_t LaunchGemmTiles(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream) {
  return DenseTiled(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream,
                    tiled::FixedTiles<kTileM, kTileN>{});
}
template cudaError_t LaunchGemmTiles<64, 128>(int, int, int, const float*, int, const float*, int,
                                              float*, int, bool, cudaStream_t);
template cudaError_t LaunchGemmTiles<128, 128>(int, int, int, const float*, int, const float*, int,
                                               float*, int, bool, cudaStream_t);
template cudaError_t LaunchGemmTiles<192, 128>(int, int, int, const float*, int, const float*, int,
                                               float*, int, bool, cudaStream_t);

template <int kRowsPer>
cudaError_t LaunchGemmPerOutput(int M, int N, int K, const float* A, int lda, const float* B,
                                int ldb, float* C, int ldc, bool accumulate, cudaStream_t stream) {
  return RunGemm(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream,
                 [&](const GemmArgs& g, int z) {
                   constexpr int kThreads = 128;
                   const dim3 grid((N + kThreads - 1) / kThreads,
                                   std::min((M + kRowsPer - 1) / kRowsPer, 65535), z);
                   GemmPerOutputKernel<kRowsPer><<<grid, kThreads, 0, stream>>>(g);
                   return cudaGetLastError();
                 });
}

cudaError_t GemmPerOutput(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                          float* C, int ldc, bool accumulate, cudaStream_t stream) {
  return LaunchGemmPerOutput<1>(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
}

cudaError_t GemmColumnStrip(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                            float* C, int ldc, bool accumulate, cudaStream_t stream) {
  return LaunchGemmPerOutput<kStripRows>(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
}

namespace {
template <bool kATransposed, bool kBTransposed, class Args>
cudaError_t LaunchGemmBatched(int batch, const Args& g, bool vector_ok, cudaStream_t stream) {
  // The tiled kernel where Gemm would take it for the whole batch's tiles, else
  // one thread per output: both in GemmOutput's order.
  if (g.M >= kTileM / 2 && g.N >= kTileN / 2 && ManyTiles(g.M, g.N, batch)) {
    // Products 64 wide (the attention's context and its gradients, the heads'
    // 64 columns or rows) in 128x64 or 64x128 tiles: a 128x128 tile would
    // compute as much padding as output.
    const auto launch = [&](auto tm, auto tn) {
      constexpr int kTM = decltype(tm)::value, kTN = decltype(tn)::value;
      const dim3 grid((g.N + kTN - 1) / kTN, (g.M + kTM - 1) / kTM, batch);
      if (grid.y > 65535) return cudaErrorInvalidValue;
      GemmTiledKernel<kTiledBK, kTiledMinBlocks, kTiledWarpTiled, kATransposed, kBTransposed, kTM,
                      kTN, false, Args>
          <<<grid, kTiledThreads, TiledSharedBytes<kTiledBK, kTM, kTN>(), stream>>>(g, vector_ok);
      return cudaGetLastError();
    };
    using Wide = std::integral_constant<int, kTileN>;
    using Narrow = std::integral_constant<int, kTileN / 2>;
    if (g.N <= kTileN / 2) return launch(Wide{}, Narrow{});
    if (g.M <= kTileM / 2) return launch(Narrow{}, Wide{});
    return launch(Wide{}, Wide{});
  }
  constexpr int kThreads = 128;
  const dim3 grid((g.N + kThreads - 1) / kThreads, std::min(g.M, 65535), batch);
  GemmPerOutputKernel<1, kATransposed, kBTransposed, Args><<<grid, kThreads, 0, stream>>>(g);
  return cudaGetLastError();
}

template <class Args>
cudaError_t LaunchGemmBatched(int batch, bool a_transposed, bool b_transposed, const Args& g,
                              bool vector_ok, cudaStream_t stream) {
  if (a_transposed) {
    return b_transposed ? LaunchGemmBatched<true, true>(batch, g, vector_ok, stream)
                        : LaunchGemmBatched<true, false>(batch, g, vector_ok, stream);
  }
  return b_transposed ? LaunchGemmBatched<false, true>(batch, g, vector_ok, stream)
                      : LaunchGemmBatched<false, false>(batch, g, vector_ok, stream);
}

// The checks of a batch's operands common to both layouts: A stored
// transposed is K rows of lda >= M, B stored transposed N rows of ldb >= K.
bool ValidBatch(int batch, int M, int N, int K, int lda, bool a_transposed, int ldb,
                bool b_transposed, int ldc) {
  return ValidShape(M, N, K, a_transposed ? K : lda, b_transposed ? N : ldb, ldc) &&
         (!a_transposed || lda >= M) && (!b_transposed || ldb >= K) && batch >= 0 &&
         batch <= 65535 && K <= kGemmKBlock;
}
}  // namespace

cudaError_t GemmBatched(int batch, int M, int N, int K, const float* A, int lda, size_t stride_a,
                        const float* B, int ldb, size_t stride_b, float* C, int ldc,
                        size_t stride_c, bool accumulate, cudaStream_t stream) {
  return GemmBatchedTransposed(batch, M, N, K, A, lda, stride_a, false, B, ldb, stride_b, false, C,
                               ldc, stride_c, accumulate, stream);
}

cudaError_t GemmBatchedTransposed(int batch, int M, int N, int K, const float* A, int lda,
                                  size_t stride_a, bool a_transposed, const float* B, int ldb,
                                  size_t stride_b, bool b_transposed, float* C, int ldc,
                                  size_t stride_c, bool accumulate, cudaStream_t stream) {
  if (batch > 1 && stride_c < static_cast<size_t>(M - 1) * ldc + N) return cudaErrorInvalidValue;
  GemmBatchStrides strides;
  strides.a = stride_a, strides.b = stride_b, strides.c = stride_c;
  return GemmBatchedStrided(batch, M, N, K, A, lda, a_transposed, B, ldb, b_transposed, C, ldc,
                            strides, accumulate, stream);
}

cudaError_t GemmBatchedStrided(int batch, int M, int N, int K, const float* A, int lda,
                               bool a_transposed, const float* B, int ldb, bool b_transposed,
                               float* C, int ldc, const GemmBatchStrides& strides, bool accumulate,
                               cudaStream_t stream) {
  // Outputs at one place for every group, or for a group's every entry,
  // would overlap (and a zero step between groups reads as k blocks).
  if (!ValidBatch(batch, M, N, K, lda, a_transposed, ldb, b_transposed, ldc) || strides.inner < 1 ||
      batch % strides.inner != 0 || (batch / strides.inner > 1 && strides.c == 0) ||
      (strides.inner > 1 && strides.c_inner == 0)) {
    return cudaErrorInvalidValue;
  }
  if (batch == 0 || M == 0 || N == 0) return cudaSuccess;
  GemmArgs g{M, N, K, A, lda, B, ldb, accumulate ? C : nullptr, ldc, C, ldc};
  g.batch_a = strides.a;
  g.batch_b = strides.b;
  g.batch_o = strides.c;
  const bool vector_ok = lda % 4 == 0 && ldb % 4 == 0 && strides.a % 4 == 0 && strides.b % 4 == 0 &&
                         strides.a_inner % 4 == 0 && strides.b_inner % 4 == 0 && Aligned16(A) &&
                         Aligned16(B);
  // One level: GemmArgs's kernels (the grouped ones hold more registers).
  if (strides.inner == 1)
    return LaunchGemmBatched(batch, a_transposed, b_transposed, g, vector_ok, stream);
  const GemmGroupedArgs grouped{g, strides.inner, strides.a_inner, strides.b_inner,
                                strides.c_inner};
  return LaunchGemmBatched(batch, a_transposed, b_transposed, grouped, vector_ok, stream);
}

cudaError_t Gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
                 int ldc, bool accumulate, cudaStream_t stream) {
  // The 128x128 tiled kernel when its tiles are mostly real and fill the chip
  // (128x96 or 192x128 where those would leave fewer SMs idle in the last
  // wave, SoonestTile);
  // smaller tiles where 64x64 ones would (an EST of 4 sequences' projections
  // alone: 37 against the chain's 102 us at 512x768x768 on an H100, run 16);
  // else the chain kernel for long chains (a k block's) and for few outputs
  // (3.7-4.7 against 8.7-14 us in 64x64 tiles at 64-128 x 64-256), 4-row
  // strips for many outputs with short chains, one thread per output for the
  // rest.
  if (const std::optional<BlockTile> tile = TiledBlockTile(M, N, K)) {
    switch (*tile) {
      case BlockTile::k192x128:
        return LaunchGemmTiles<192, kTileN>(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
      case BlockTile::k128x96:
        return LaunchGemmTiledShape<kTileM, 96>(M, N, K, A, lda, B, ldb, C, ldc, accumulate,
                                                stream);
      case BlockTile::k128x128:
        break;
    }
    return GemmTiled(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
  }
  if (M >= kTileM / 2 && N >= kTileN / 2 && tiled::TileBlocks(M, N, 1, 64, 64) >= kMinTiledBlocks)
    return GemmFillTiles(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
  const int block_k = std::min(K, kGemmKBlock);
  const int64_t outputs = static_cast<int64_t>(M) * N;
  if (block_k >= kChainMinK || (block_k >= kChainShortMinK && outputs <= kChainShortMaxOutputs))
    return GemmChain(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
  if (block_k < kChainShortMinK && M >= kStripRows && outputs >= kStripMinOutputs)
    return GemmColumnStrip(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
  return GemmPerOutput(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream);
}

cudaError_t GemmBias(int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                     const float* bias, float* C, int ldc, cudaStream_t stream) {
  if (!ValidShape(M, N, K, lda, ldb, ldc) || bias == nullptr) return cudaErrorInvalidValue;
  // Where Gemm takes the tiled kernel's 128x128 or 128x96 tiles for one k
  // block: the same kernel, adding the bias as it stores.
  const std::optional<BlockTile> tile =
      tiled::KBlocks(K) == 1 ? TiledBlockTile(M, N, K) : std::nullopt;
  if (tile == BlockTile::k128x128) {
    return LaunchTiled<kTiledBK, kTiledMinBlocks, kTiledWarpTiled, kTileM, kTileN, true>(
        M, N, K, A, lda, B, ldb, C, ldc, false, stream, bias);
  }
  if (tile == BlockTile::k128x96) {
    return LaunchTiled<kTiledBK, kTiledMinBlocks, kTiledWarpTiled, kTileM, 96, true>(
        M, N, K, A, lda, B, ldb, C, ldc, false, stream, bias);
  }
  if (const cudaError_t err = Gemm(M, N, K, A, lda, B, ldb, C, ldc, false, stream);
      err != cudaSuccess || M == 0 || N == 0)
    return err;
  const size_t n = static_cast<size_t>(M) * N;
  return LaunchForEach(n, stream, [=] __device__(size_t e) {
    float& c = C[e / N * ldc + e % N];
    c = c + bias[e % N];
  });
}

}  // namespace easyscale::cuda
