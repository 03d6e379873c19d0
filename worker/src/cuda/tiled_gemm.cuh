// File: worker/src/cuda/tiled_gemm.cuh
//
// The tiled fp32 GEMM (128x128, 64x128 or 64x64 tiles) over operand
// *sources* and an output *sink*, so
// a product whose operands are not plain matrices (a convolution's columns,
// gathered as the tile needs them: an implicit GEMM) runs the same tiling as
// cuda::Gemm. C[r, c] = the fma chain over k of A[r, k] * B[k, c] in
// formulas::GemmOutput's order: each k block (kGemmKBlock, or the launch's
// k_block) is one grid z-slice whose chain starts from the sink's initial value (block 0) or 0 (the
// others, into partial sums added in block order afterwards).
//
// The operands reach shared memory a slice of kBK k at a time, k-major
// (slice[k * (kTile + kPad) + row or column]), through the sources' Pipeline:
// - through registers (kAsync false) into two slices: a source's Load(k0,
//   regs) reads the slice at this k block's offset k0 (0 past the operand's
//   rows, columns or this block's k) while the other slice is multiplied, and
//   Store(regs, slice) writes it after;
// - or copied asynchronously (kAsync, cp.async) into a ring of kStages slices,
//   kStages - 1 ahead of the multiplication: Copy(k0, slice) issues the
//   slice's copies, zero-filled where Load would read 0; a tap's slices come
//   in order, so a source may read ahead what its next slice needs.
// Start(tile0, k_begin, k_count) fixes the thread's rows or columns and the k
// block; Tap(t) moves to tap t (the sink's Taps() of them, for sinks that sum
// several products, as a convolution's input gradient sums its taps).
//
// A sink: Init(r, c) the chain's start; Column(c) what a column's stores need
// (its offsets), Store(r, column, v); Start(z) for k block z. kTapSum sinks also
// have Taps(), TapValid(t, col) and TapUsed(t): the stored value is the sum
// from +0, in tap order, of the valid taps' chains (each from 0); a tap that
// is not used is valid for no column and is skipped.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "cp_async.cuh"
#include "cuda_kernels.h"
#include "easyscale/worker/kernel_formulas.h"
#include "stream_scratch.h"

namespace easyscale::cuda::tiled {

inline constexpr int kThreads = 256;  // a 16x16 thread grid

template <int kBK_, int kStages_, bool kAsync_>
struct Pipeline {
  static constexpr int kBK = kBK_, kStages = kStages_;
  static constexpr bool kAsync = kAsync_;
  static_assert(kThreads % kBK == 0 && kStages >= 2 && (kAsync || kStages == 2));
};
// The two in use (BENCHMARKS, issue 19 run 11, on an H100): the ring frees
// the staging registers, so a convolution's forward product fits two 128x128
// blocks an SM and hides its gathered loads three slices ahead (ResNet-50's
// forward convolutions 28.4 -> 21.9 ms a step); the gradients' products ran
// slower in it (their backward 60.9 -> 62.7 ms at 16 k and 2 slices, 67.7 at
// 8 and 4), so they keep the registers. The ring's 16 k a slice halve its
// waits and barriers per fma against 8 k in 4 slices (run 30: ResNet-50's
// forward convolutions 18.55 -> 18.06 ms, its step 0.982 of 8 k), at 50 KB of
// shared memory a 128x128 block.
using RegisterSlices = Pipeline<16, 2, false>;
using AsyncRing = Pipeline<16, 3, true>;

// Register tile entry i of thread row ty (or column tx): 4x4 sub-tiles 64
// apart (one of them in a 64-wide tile).
__device__ __forceinline__ int TileOffset(int t, int i) { return t * 4 + i % 4 + (i / 4) * 64; }

// The epilogue's staged rows (64 at a time) of a kTileN-column tile: their
// stride keeps float4 alignment and shifts banks between rows.
template <int kTileN>
inline constexpr int kStagedLd = kTileN + 4;

// Four consecutive floats from src into regs: one 16-byte load when `full`
// (aligned, all inside), else the first `inside` of them (<= 0: none) and
// zeros after.
__device__ __forceinline__ void LoadFour(const float* src, bool full, int inside, float* regs) {
  if (full) {
    const float4 f = *reinterpret_cast<const float4*>(src);
    regs[0] = f.x, regs[1] = f.y, regs[2] = f.z, regs[3] = f.w;
    return;
  }
#pragma unroll
  for (int q = 0; q < 4; ++q) regs[q] = q < inside ? src[q] : 0.0f;
}

// A dense row-major A over kTile rows: element (r, k) at p[r * ld + k],
// loaded as float4s along k when aligned.
template <int kTile, class PipelineT>
struct RowsSource {
  using Pipeline = PipelineT;
  static_assert(!Pipeline::kAsync, "loads through registers");
  static constexpr int kBK = Pipeline::kBK, kTileRows = kTile;
  static constexpr int kPad = 4;  // keeps float4 alignment, shifts banks between k rows
  static constexpr int kVec = kTile * kBK / 4 / kThreads;  // Load's float4s
  static constexpr int kRegs = 4 * kVec;
  const float* p;
  int ld, rows;
  size_t tap_step;  // Tap(t) reads p + t * tap_step
  bool vector_ok;   // 16-byte aligned rows: Load reads float4s

  __device__ void Start(int tile0, int k_begin, int k_count) {
    r0_ = tile0;
    k_begin_ = k_begin;
    k_count_ = k_count;
    base_ = p + k_begin;
  }
  __device__ void Tap(int t) { base_ = p + k_begin_ + t * tap_step; }
  __device__ void Load(int k0, float (&regs)[kRegs]) const {
    const bool full = vector_ok && r0_ + kTile <= rows && k0 + kBK <= k_count_;
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int idx = threadIdx.x + v * kThreads;
      const int r = r0_ + idx / (kBK / 4), k = k0 + (idx % (kBK / 4)) * 4;
      LoadFour(base_ + static_cast<size_t>(r) * ld + k, full, r < rows ? k_count_ - k : 0,
               &regs[4 * v]);
    }
  }
  __device__ void Store(const float (&regs)[kRegs], float* slice) const {
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int idx = threadIdx.x + v * kThreads;
      const int r = idx / (kBK / 4), k = (idx % (kBK / 4)) * 4;
#pragma unroll
      for (int q = 0; q < 4; ++q) slice[(k + q) * (kTile + kPad) + r] = regs[4 * v + q];
    }
  }
  // The thread's state, set by Start.
  const float* base_;
  int r0_, k_begin_, k_count_;
};

// A dense row-major B over kTile columns: element (k, c) at p[k * ld + c],
// loaded as float4s along c when aligned, stored as the slice's k rows.
template <int kTile, class PipelineT>
struct ColumnsOfRowsSource {
  using Pipeline = PipelineT;
  static_assert(!Pipeline::kAsync, "loads through registers");
  static constexpr int kBK = Pipeline::kBK, kTileRows = kTile, kPad = 0;
  static constexpr int kVec = kTile * kBK / 4 / kThreads;  // Load's float4s
  static constexpr int kRegs = 4 * kVec;
  const float* p;
  int ld, cols;
  bool vector_ok;  // 16-byte aligned rows: Load reads float4s

  __device__ void Start(int tile0, int k_begin, int k_count) {
    c0_ = tile0;
    k_count_ = k_count;
    base_ = p + static_cast<size_t>(k_begin) * ld;
  }
  __device__ void Load(int k0, float (&regs)[kRegs]) const {
    const bool full = vector_ok && c0_ + kTile <= cols && k0 + kBK <= k_count_;
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int idx = threadIdx.x + v * kThreads;
      const int k = k0 + idx / (kTile / 4), c = c0_ + (idx % (kTile / 4)) * 4;
      LoadFour(base_ + static_cast<size_t>(k) * ld + c, full, k < k_count_ ? cols - c : 0,
               &regs[4 * v]);
    }
  }
  __device__ void Store(const float (&regs)[kRegs], float* slice) const {
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int idx = threadIdx.x + v * kThreads;
      const int k = idx / (kTile / 4), c = (idx % (kTile / 4)) * 4;
      *reinterpret_cast<float4*>(&slice[k * kTile + c]) =
          make_float4(regs[4 * v], regs[4 * v + 1], regs[4 * v + 2], regs[4 * v + 3]);
    }
  }

  // The thread's state, set by Start.
  const float* base_;
  int c0_, k_count_;
};

// Element-wise gathered operands over kTile rows or columns: each thread
// loads or copies kRegs elements of the slice, either one tile column (or
// row) at kRegs k rows (AlongTile: the warp's loads run along the tile, e.g.
// along an image row) or one k at kRegs tile columns (AlongK); element v goes
// to Slot(v, slice).
template <int kTile, class PipelineT>
struct AlongTile {
  using Pipeline = PipelineT;
  static constexpr int kBK = Pipeline::kBK, kTileRows = kTile, kPad = 0;
  static constexpr int kRegs = kTile * kBK / kThreads, kCopies = kRegs;
  __device__ static int Index() { return threadIdx.x % kTile; }  // the thread's tile index
  __device__ static int K(int v) { return threadIdx.x / kTile + (kThreads / kTile) * v; }
  __device__ static float* Slot(int v, float* slice) {
    return &slice[K(v) * (kTile + kPad) + Index()];
  }
  __device__ static void Store(const float (&regs)[kRegs], float* slice) {
#pragma unroll
    for (int v = 0; v < kRegs; ++v) *Slot(v, slice) = regs[v];
  }
};
template <int kTile, class PipelineT>
struct AlongK {
  using Pipeline = PipelineT;
  static constexpr int kBK = Pipeline::kBK, kTileRows = kTile;
  static constexpr int kRegs = kTile * kBK / kThreads;
  static constexpr int kPad = 4;  // threads of one column store to banks 4 apart
  __device__ static int K() { return threadIdx.x % kBK; }
  __device__ static int Index(int v) { return threadIdx.x / kBK + (kThreads / kBK) * v; }
  __device__ static float* Slot(int v, float* slice) {
    return &slice[K() * (kTile + kPad) + Index(v)];
  }
  __device__ static void Store(const float (&regs)[kRegs], float* slice) {
#pragma unroll
    for (int v = 0; v < kRegs; ++v) *Slot(v, slice) = regs[v];
  }
};

// A dense row-major output [M][N] (ld apart) from init (same layout) or 0;
// with k blocks, block z writes its partial sums [z][M][N] into `parts`.
struct DenseSink {
  static constexpr bool kTapSum = false;
  float* out;
  int ld;
  const float* init;  // ld apart too
  float* parts;
  int M, N;
  using ColumnT = int;

  __device__ void Start(int z) {
    if (gridDim.z == 1) return;
    out = parts + static_cast<size_t>(z) * M * N;
    out_ld_ = N;
    if (z > 0) init = nullptr;
  }
  __device__ int Column(int c) const { return c; }
  __device__ float Init(int r, int c) const {
    return init != nullptr ? init[static_cast<size_t>(r) * ld + c] : 0.0f;
  }
  __device__ void Store(int r, int c, float v) const {
    out[static_cast<size_t>(r) * (gridDim.z == 1 ? ld : out_ld_) + c] = v;
  }

  int out_ld_;  // set by Start
};

template <int kMinBlocks, class ASource, class BSource, class Sink>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    TiledGemmKernel(int M, int N, int K, int k_block, ASource a, BSource b, Sink sink) {
  using Pipeline = typename ASource::Pipeline;
  static_assert(std::is_same_v<Pipeline, typename BSource::Pipeline>, "one pipeline for both");
  constexpr int kBK = Pipeline::kBK, kStages = Pipeline::kStages;
  constexpr int kTileM = ASource::kTileRows, kTileN = BSource::kTileRows;
  constexpr int kLdA = kTileM + ASource::kPad, kLdB = kTileN + BSource::kPad;
  constexpr int kRM = kTileM / 16, kRN = kTileN / 16;  // the thread's register tile
  constexpr int kLdC = kStagedLd<kTileN>;
  extern __shared__ __align__(16) float tiled_smem[];
  float* const As = tiled_smem;                         // [kStages][kBK][kLdA]
  float* const Bs = tiled_smem + kStages * kBK * kLdA;  // [kStages][kBK][kLdB]

  const int z = static_cast<int>(blockIdx.z), k_begin = z * k_block;
  const int k_count = gridDim.z == 1 ? K : min(k_block, K - k_begin);
  const int m0 = blockIdx.y * kTileM, n0 = blockIdx.x * kTileN;
  a.Start(m0, k_begin, k_count);
  b.Start(n0, k_begin, k_count);
  sink.Start(z);
  // The 16x16 thread grid, each warp on an 8x4 patch of it (fewer distinct
  // shared-memory vectors per warp read).
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tx = (warp % 2) * 8 + lane % 8, ty = (warp / 2) * 4 + lane / 8;
  float acc[kRM][kRN], sum[Sink::kTapSum ? kRM : 1][Sink::kTapSum ? kRN : 1];
  auto multiply_k = [&](int buf, int kk) {
    const float* const as = As + (buf * kBK + kk) * kLdA;
    const float* const bs = Bs + (buf * kBK + kk) * kLdB;
    float av[kRM], bv[kRN];
#pragma unroll
    for (int q = 0; q < kRM / 4; ++q) {
      const float4 v = *reinterpret_cast<const float4*>(&as[q * 64 + ty * 4]);
      av[q * 4 + 0] = v.x, av[q * 4 + 1] = v.y, av[q * 4 + 2] = v.z, av[q * 4 + 3] = v.w;
    }
#pragma unroll
    for (int q = 0; q < kRN / 4; ++q) {
      const float4 v = *reinterpret_cast<const float4*>(&bs[q * 64 + tx * 4]);
      bv[q * 4 + 0] = v.x, bv[q * 4 + 1] = v.y, bv[q * 4 + 2] = v.z, bv[q * 4 + 3] = v.w;
    }
    // Column by column: consecutive fmas share bv[j] (the operand reuse cache).
#pragma unroll
    for (int j = 0; j < kRN; ++j) {
#pragma unroll
      for (int i = 0; i < kRM; ++i) acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
    }
  };

  int taps = 1;
  if constexpr (Sink::kTapSum) {
    taps = sink.Taps();
#pragma unroll
    for (int i = 0; i < kRM; ++i) {
#pragma unroll
      for (int j = 0; j < kRN; ++j) sum[i][j] = 0.0f;
    }
  }
  const int slices = (k_count + kBK - 1) / kBK;
  for (int t = 0; t < taps; ++t) {
    if constexpr (Sink::kTapSum) {
      if (!sink.TapUsed(t)) continue;  // the same for the whole block
      a.Tap(t);
      b.Tap(t);
    }
#pragma unroll
    for (int i = 0; i < kRM; ++i) {
#pragma unroll
      for (int j = 0; j < kRN; ++j) {
        const int r = m0 + TileOffset(ty, i), c = n0 + TileOffset(tx, j);
        acc[i][j] = !Sink::kTapSum && r < M && c < N ? sink.Init(r, c) : 0.0f;
      }
    }
    // Slice s of the tap, in buffer buf.
    auto multiply_slice = [&](int s, int buf) {
      const int valid = k_count - s * kBK;
      if (valid >= kBK) {
#pragma unroll
        for (int kk = 0; kk < kBK; ++kk) multiply_k(buf, kk);
      } else {
        // The last, partial slice: only real k, so no fma with padding zeros
        // (which could turn a -0 into +0).
        for (int kk = 0; kk < valid; ++kk) multiply_k(buf, kk);
      }
    };
    if constexpr (Pipeline::kAsync) {
      auto copy = [&](int s) {
        if (s < slices) {
          a.Copy(s * kBK, As + (s % kStages) * kBK * kLdA);
          b.Copy(s * kBK, Bs + (s % kStages) * kBK * kLdB);
        }
        CpAsyncCommit();  // empty groups too, so the wait count stays exact
      };
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) copy(s);
      for (int s = 0; s < slices; ++s) {
        CpAsyncWait<kStages - 2>();  // this thread's copies of slice s landed
        // Everyone's landed, and everyone finished multiplying slice s - 1,
        // whose buffer slice s + kStages - 1 takes.
        __syncthreads();
        copy(s + kStages - 1);
        multiply_slice(s, s % kStages);
      }
      __syncthreads();  // the next tap's first copies reuse buffers still being read
    } else {
      float ra[ASource::kRegs], rb[BSource::kRegs];
      if (slices > 0) {
        a.Load(0, ra);
        b.Load(0, rb);
        a.Store(ra, As);
        b.Store(rb, Bs);
        __syncthreads();
      }
      for (int s = 0; s < slices; ++s) {
        const int buf = s & 1;
        if (s + 1 < slices) {
          a.Load((s + 1) * kBK, ra);
          b.Load((s + 1) * kBK, rb);
        }
        multiply_slice(s, buf);
        if (s + 1 < slices) {
          a.Store(ra, As + (buf ^ 1) * kBK * kLdA);
          b.Store(rb, Bs + (buf ^ 1) * kBK * kLdB);
        }
        __syncthreads();  // one barrier: the other buffer's readers finished last round
      }
    }
    if constexpr (Sink::kTapSum) {
#pragma unroll
      for (int j = 0; j < kRN; ++j) {
        const int c = n0 + TileOffset(tx, j);
        if (c >= N || !sink.TapValid(t, sink.Column(c))) continue;
#pragma unroll
        for (int i = 0; i < kRM; ++i) sum[i][j] = sum[i][j] + acc[i][j];
      }
    }
  }

  // The tile leaves through shared memory (free now: every thread passed the
  // last slice's barrier), 64 rows at a time, so that a warp stores 32
  // consecutive columns of a row where its registers hold columns 4 apart
  // (on an H100 ResNet-50's step 0.965, MobileNetV2 0.971).
  float* const staged = tiled_smem;  // [64][kLdC]
  const int column = threadIdx.x % kTileN, c = n0 + column;
#pragma unroll
  for (int band = 0; band < kRM / 4; ++band) {
    if (band > 0) __syncthreads();  // the previous band has been read
#pragma unroll
    for (int i = band * 4; i < band * 4 + 4; ++i) {
      float* const row = staged + (ty * 4 + i % 4) * kLdC;  // TileOffset(ty, i) - band * 64
#pragma unroll
      for (int q = 0; q < kRN / 4; ++q) {
        const auto v = [&](int j) { return Sink::kTapSum ? sum[i][j] : acc[i][j]; };
        *reinterpret_cast<float4*>(&row[q * 64 + tx * 4]) =
            make_float4(v(q * 4), v(q * 4 + 1), v(q * 4 + 2), v(q * 4 + 3));
      }
    }
    __syncthreads();
    if (c >= N) continue;
    const typename Sink::ColumnT col = sink.Column(c);
    for (int r = threadIdx.x / kTileN; r < 64; r += kThreads / kTileN) {
      const int m = m0 + band * 64 + r;
      if (m < M) sink.Store(m, col, staged[r * kLdC + column]);
    }
  }
}

// The k blocks of a K-long chain in blocks of k_block (formulas::kGemmKBlock
// for GemmOutput's order; a weight gradient's own, WeightGradientKBlock).
inline int KBlocks(int K, int k_block = formulas::kGemmKBlock) {
  return K <= k_block ? 1 : (K + k_block - 1) / k_block;
}

// One launch of the kernel over `z` k blocks of k_block (the sink handles them).
// kMinBlocks: the thread blocks per SM the registers must allow with 128x128
// tiles; smaller tiles need fewer registers and ask for more: 2 with 64x128,
// 3 with 64x64 (80 registers a thread, no spills; on an H100 ResNet-50's step
// 0.981 of 2 blocks, its 64x64 weight gradients ran 12-15 warps an SM).
template <int kMinBlocks, class ASource, class BSource, class Sink>
cudaError_t LaunchTiled(int M, int N, int K, int z, const ASource& a, const BSource& b,
                        const Sink& sink, cudaStream_t stream,
                        int k_block = formulas::kGemmKBlock) {
  constexpr int kTileM = ASource::kTileRows, kTileN = BSource::kTileRows;
  const dim3 grid((N + kTileN - 1) / kTileN, (M + kTileM - 1) / kTileM, z);
  if (grid.y > 65535 || z > 65535) return cudaErrorInvalidValue;
  using Pipeline = typename ASource::Pipeline;
  constexpr int kSlices =
      Pipeline::kStages * Pipeline::kBK * (kTileM + ASource::kPad + kTileN + BSource::kPad);
  constexpr int kStaged = 64 * kStagedLd<kTileN>;  // TiledGemmKernel's epilogue
  constexpr int kBytes = (kSlices > kStaged ? kSlices : kStaged) * static_cast<int>(sizeof(float));
  static_assert(kBytes <= 96 * 1024, "two blocks an SM");
  constexpr int kTile = kTileM * kTileN;
  constexpr int kBlocks = kTile <= 64 * 64 ? 3 : kTile < 128 * 128 ? 2 : kMinBlocks;
  const auto kernel = TiledGemmKernel<kBlocks, ASource, BSource, Sink>;
  if constexpr (kBytes > 48 * 1024) {
    // Above 48 KB a block needs the opt-in (a device's setting: every launch).
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
    if (err != cudaSuccess) return err;
  }
  kernel<<<grid, kThreads, kBytes, stream>>>(M, N, K, k_block, a, b, sink);
  return cudaGetLastError();
}

// Calls launch(tile_m, tile_n) (std::integral_constants) with the tile shape
// for an M x N product of z k blocks: 128x128 where those tiles are mostly
// real and nearly fill the GPU, 64-row tiles for 64 rows or fewer, 64x64
// where larger tiles would leave SMs idle. kFillBlocks, 7/8 of two blocks on
// each of an H100's 132 SMs: the larger tile's fewer shared-memory reads per
// fma beat the last eighth of a wave (on an H100, 198 against 264: ResNet-50's
// step 0.993, CIFAR ResNet-18 0.960; 231 against 198: 0.991 and 1.003; 165
// against 198: 1.016). The shape only decides which thread computes an
// output, never its value.
inline long long TileBlocks(int M, int N, int z, int tile_m, int tile_n) {
  return static_cast<long long>((M + tile_m - 1) / tile_m) * ((N + tile_n - 1) / tile_n) * z;
}
inline constexpr long long kFillBlocks = 231;
// Whether WithTiles picks 128x128 tiles.
inline bool WideTiles(int M, int N, int z) {
  return M > 64 && TileBlocks(M, N, z, 128, 128) >= kFillBlocks;
}
template <typename Launch>
cudaError_t WithTiles(int M, int N, int z, Launch&& launch) {
  using Wide = std::integral_constant<int, 128>;
  using Narrow = std::integral_constant<int, 64>;
  if (WideTiles(M, N, z)) return launch(Wide{}, Wide{});
  if (TileBlocks(M, N, z, 64, 128) >= kFillBlocks) return launch(Narrow{}, Wide{});
  return launch(Narrow{}, Narrow{});
}
// RunTiledDense's tile shape: WithTiles' choice, or one fixed shape (for gemm_bench's
// comparisons of shapes).
struct ChosenTiles {
  template <typename Launch>
  cudaError_t operator()(int M, int N, int z, Launch&& launch) const {
    return WithTiles(M, N, z, launch);
  }
};
template <int kTileM, int kTileN>
struct FixedTiles {
  template <typename Launch>
  cudaError_t operator()(int, int, int, Launch&& launch) const {
    return launch(std::integral_constant<int, kTileM>{}, std::integral_constant<int, kTileN>{});
  }
};

// C [M][N] (ldc apart) = the product, from C itself (accumulate) or 0, with
// the sources make_a(tile_m) and make_b(tile_n) for WithTiles' shape: one
// launch when K fits a k block, else the blocks' partial sums in
// stream-ordered scratch (captured into a CUDA graph too) and their sum.
template <int kMinBlocks, class MakeA, class MakeB, class Tiles = ChosenTiles>
cudaError_t RunTiledDense(int M, int N, int K, MakeA&& make_a, MakeB&& make_b, float* C, int ldc,
                          bool accumulate, cudaStream_t stream, int k_block = formulas::kGemmKBlock,
                          Tiles tiles = {}) {
  if (M == 0 || N == 0) return cudaSuccess;
  DenseSink sink{C, ldc, accumulate ? C : nullptr, nullptr, M, N};
  const int blocks = KBlocks(K, k_block);
  auto launch = [&](auto tm, auto tn) {
    return LaunchTiled<kMinBlocks>(M, N, K, blocks, make_a(tm), make_b(tn), sink, stream, k_block);
  };
  if (blocks == 1) return tiles(M, N, 1, launch);
  return WithStreamScratch(static_cast<size_t>(M) * N * blocks, stream, [&](float* parts) {
    sink.parts = parts;  // `launch` makes its sink from this one
    const cudaError_t err = tiles(M, N, blocks, launch);
    return err == cudaSuccess ? SumParts(M, N, blocks, parts, C, ldc, stream) : err;
  });
}

}  // namespace easyscale::cuda::tiled
