// Conv's CUDA kernels: the three products of conv.cc as implicit GEMMs on the
// tiled kernel (tiled_gemm.cuh), each operand gathered from the NCHW tensors
// as the tile needs it (no columns in memory), in conv.cc's orders; the
// input gradient's fold for products too deep for one k block. A strided
// convolution's input gradient runs one product per stride phase (a phase no
// tap reads is stored as zeros); a pointwise one's input gradient is one
// product, read from the weights and dY as they are stored.
#include <algorithm>

#include "cuda/tiled_gemm.cuh"
#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/cuda_ops.h"
#include "graph/ops/pool_formulas.h"
#include "launch.cuh"

namespace easyscale::graph::cuda_ops {
namespace {

using cuda::tiled::AlongK;
using cuda::tiled::AlongTile;
using cuda::tiled::AsyncRing;
using cuda::tiled::kThreads;
using cuda::tiled::RegisterSlices;
using cuda::tiled::RowsSource;

// Where sample b's group starts in an NCHW tensor of `groups` groups of
// `channels` planes of `plane` elements.
__device__ __forceinline__ size_t GroupStart(int b, int groups, int group, int channels,
                                             size_t plane) {
  return (static_cast<size_t>(b) * groups + group) * channels * plane;
}

// The output row that kernel row ky reads input row iy from, or -1; the same
// for columns.
__device__ __forceinline__ int RowReads(const cpu::ConvGeometry& g, int iy, int ky) {
  const int oy = StrideQuotient(iy + g.PT - ky * g.DH, g.SH);
  return oy < g.OH ? oy : -1;
}
__device__ __forceinline__ int ColumnReads(const cpu::ConvGeometry& g, int ix, int kx) {
  const int ox = StrideQuotient(ix + g.PL - kx * g.DW, g.SW);
  return ox < g.OW ? ox : -1;
}

// Tap t = (ky, kx) of the input element (iy, ix) reads the output position
// (oy, ox) when it exists.
__device__ __forceinline__ bool TapReads(const cpu::ConvGeometry& g, int t, int iy, int ix, int& oy,
                                         int& ox) {
  oy = RowReads(g, iy, t / g.KW);
  ox = ColumnReads(g, ix, t % g.KW);
  return oy >= 0 && ox >= 0;
}

// Whether the tap of a TapTable entry lands inside the image from the window
// corner (iy0, ix0).
__device__ __forceinline__ bool Inside(const cpu::ConvGeometry& g, int iy0, int ix0, int2 tap) {
  return static_cast<unsigned>(iy0 + (tap.y >> 16)) < static_cast<unsigned>(g.H) &&
         static_cast<unsigned>(ix0 + (tap.y & 0xffff)) < static_cast<unsigned>(g.W);
}

// The input elements of one stride phase (iy % SH, ix % SW) = (py, px),
// numbered row-major within a sample. A tap reads either every element of a
// phase (where an output position exists) or none, so the input gradient runs
// one product per phase over the taps that read it: with stride 2, a quarter
// of the taps a product over every element would run, mostly reading zeros.
struct StridePhase {
  int py, px, rows, cols;  // rows x cols elements a sample

  __device__ void Element(const cpu::ConvGeometry& g, int n, int& b, int& iy, int& ix) const {
    const int per = rows * cols, e = n % per;
    b = n / per;
    iy = py + e / cols * g.SH;
    ix = px + e % cols * g.SW;
  }
  // Whether tap t can read the phase's elements; where it cannot, TapReads
  // is false for every one of them.
  __host__ __device__ bool Reads(const cpu::ConvGeometry& g, int t) const {
    return (py + g.PT - t / g.KW * g.DH) % g.SH == 0 && (px + g.PL - t % g.KW * g.DW) % g.SW == 0;
  }
};

// A k index over (b, oy, ox) that steps forward without divisions.
struct PositionOdometer {
  int b, oy, ox;
  __device__ void Start(const cpu::ConvGeometry& g, int k) {
    const int P = g.OH * g.OW;
    b = k / P;
    oy = k % P / g.OW;
    ox = k % g.OW;
  }
  __device__ void Advance(const cpu::ConvGeometry& g, int n) {
    ox += n;
    while (ox >= g.OW) {
      ox -= g.OW;
      if (++oy == g.OH) oy = 0, ++b;
    }
  }
};

// An along-k source's thread state: its k = (b, oy, ox) position, walked a
// slice at a time, and its first tile row or column.
struct PositionWalk {
  PositionOdometer at;
  int tile0, k0, k_count;
  __device__ void Start(const cpu::ConvGeometry& g, int tile_start, int k_begin, int count) {
    tile0 = tile_start;
    at.Start(g, k_begin + AlongK<64, RegisterSlices>::K());  // the same for every tile
    k0 = 0;
    k_count = count;
  }
  // Moves to the slice at k_slice; whether the thread's k is inside the block.
  __device__ bool Next(const cpu::ConvGeometry& g, int k_slice) {
    at.Advance(g, k_slice - k0);
    k0 = k_slice;
    return k_slice + AlongK<64, RegisterSlices>::K() < k_count;
  }
};

// The forward product's B: column (kc, (b, p)) of the group's columns, one
// column (output position) per thread, copied through the ring.
template <int kTile>
struct ColumnsSource {
  using Layout = AlongTile<kTile, AsyncRing>;
  using Pipeline = AsyncRing;
  static constexpr int kTileRows = kTile, kPad = Layout::kPad, kCopies = Layout::kCopies;
  static_assert(kTile % 32 == 0 && 32 % kCopies == 0, "a warp's copies share their k");
  const float* x;
  const int2* table;
  cpu::ConvGeometry g;
  int groups, group, columns;

  __device__ void Start(int tile0, int k_begin, int k_count) {
    const int n = tile0 + Layout::Index(), P = g.OH * g.OW;
    ok_ = n < columns;
    const int b = ok_ ? n / P : 0, p = n % P;
    iy0_ = p / g.OW * g.SH - g.PT;
    ix0_ = p % g.OW * g.SW - g.PL;
    corner_ = static_cast<ptrdiff_t>(GroupStart(b, groups, group, g.C, size_t{1} * g.H * g.W)) +
              static_cast<ptrdiff_t>(iy0_) * g.W + ix0_;
    k_begin_ = k_begin;
    k_count_ = k_count;
    ReadTaps(0);
  }
  __device__ void Tap(int) {}
  // Copies the slice at k0 with the taps the previous copy read (the slices
  // come in order), then reads the next slice's, so the copies need not wait
  // for the table. A warp's threads copy the same k (Layout::K(v) depends on
  // the warp only), so lane v of each kCopies holds the table entry of copy v
  // and the others take it by shuffle: two registers a thread, not kCopies
  // pairs (at 16 k a slice, 128x128 tiles spilled 200 bytes).
  __device__ void Copy(int k0, float* slice) {
#pragma unroll
    for (int v = 0; v < kCopies; ++v) {
      const int2 tap =
          make_int2(__shfl_sync(~0u, tap_.x, v, kCopies), __shfl_sync(~0u, tap_.y, v, kCopies));
      const bool valid = ok_ && k0 + Layout::K(v) < k_count_ && Inside(g, iy0_, ix0_, tap);
      cuda::CpAsync4(Layout::Slot(v, slice), valid ? x + corner_ + tap.x : x, valid);
    }
    ReadTaps(k0 + Layout::kBK);
  }
  __device__ void ReadTaps(int k0) {
    const int k = k0 + Layout::K(threadIdx.x % kCopies);
    tap_ = k < k_count_ ? __ldg(table + k_begin_ + k) : make_int2(0, 0);
  }

  // The thread's state, set by Start and Copy.
  ptrdiff_t corner_;
  int iy0_, ix0_, k_begin_, k_count_;
  bool ok_;
  int2 tap_;  // the next slice's copy threadIdx.x % kCopies
};

// Where index i of a k-major operand starts: a dense matrix's column i.
struct DenseIndex {
  __device__ size_t Offset(int i) const { return i; }
};
// Where column n = (b, p) of a group's planes starts: sample b's position p.
struct PlaneIndex {
  int groups, group, channels, plane;
  __device__ size_t Offset(int n) const {
    return GroupStart(n / plane, groups, group, channels, plane) + n % plane;
  }
};

// An operand stored k-major on the ring: element (i, k) of tile index i (a
// row of A, a column of B) at p + index.Offset(i) + k * k_step, copied a
// slice row at a time, four indices in one 16-byte copy where `vectors` (four
// consecutive indices from a multiple of 4 adjacent in memory, p and k_step
// keeping them 16-byte aligned), else one element per copy.
template <int kTile, class Index>
struct KMajorSource {
  using Pipeline = AsyncRing;
  static constexpr int kBK = Pipeline::kBK, kTileRows = kTile;
  static constexpr int kPad = 4;                          // keeps the slice rows 16-byte aligned
  static constexpr int kVectors = kTile / 4 * kBK;        // a slice's 16-byte copies
  static constexpr int kCopies = kTile * kBK / kThreads;  // a thread's single copies a slice
  const float* p;
  Index index;
  size_t k_step;
  int count;  // A's rows or B's columns
  bool vectors;

  __device__ void Start(int tile0, int k_begin, int k_count) {
    const int i = tile0 + (vectors ? static_cast<int>(threadIdx.x) % (kTile / 4) * 4
                                   : static_cast<int>(threadIdx.x) % kTile);
    inside_ = vectors ? min(4, count - i) : i < count;
    base_ = p + (inside_ > 0 ? index.Offset(i) : 0) + k_begin * k_step;
    k_count_ = k_count;
  }
  __device__ void Tap(int) {}
  __device__ void Copy(int k0, float* slice) const {
    if (vectors) {
      // The thread's index stays: kThreads is a multiple of kTile / 4.
#pragma unroll
      for (int v = 0; v < (kVectors + kThreads - 1) / kThreads; ++v) {
        const int idx = threadIdx.x + v * kThreads;
        if (idx >= kVectors) return;  // a slice of fewer vectors than threads
        const int k = idx / (kTile / 4);
        const bool valid = inside_ > 0 && k0 + k < k_count_;
        cuda::CpAsync16(&slice[k * (kTile + kPad) + threadIdx.x % (kTile / 4) * 4],
                        valid ? base_ + (k0 + k) * k_step : p, valid ? 4 * inside_ : 0);
      }
      return;
    }
#pragma unroll
    for (int v = 0; v < kCopies; ++v) {
      const int k = threadIdx.x / kTile + kThreads / kTile * v;
      const bool valid = inside_ > 0 && k0 + k < k_count_;
      cuda::CpAsync4(&slice[k * (kTile + kPad) + threadIdx.x % kTile],
                     valid ? base_ + (k0 + k) * k_step : p, valid);
    }
  }

  // The thread's state, set by Start.
  const float* base_;
  int inside_, k_count_;  // inside_: how many of its indices are the operand's
};

// The forward product's output, written into the group's NCHW channels,
// chained from the bias; or a pointwise convolution's input gradient, its one
// tap's chain (from 0) added to +0 as InputGradSink's tap sum adds it.
struct NchwSink {
  static constexpr bool kTapSum = false;
  using ColumnT = size_t;  // the column's (b, p) offset in y
  float* y;
  const float* bias;  // the group's, or null
  int P, channels, first;
  bool tap_sum;

  __device__ void Start(int) {}
  __device__ size_t Column(int n) const {
    return (static_cast<size_t>(n / P) * channels + first) * P + n % P;
  }
  __device__ float Init(int m, int) const { return bias != nullptr ? bias[m] : 0.0f; }
  __device__ void Store(int m, size_t col, float v) const {
    y[col + static_cast<size_t>(m) * P] = tap_sum ? 0.0f + v : v;
  }
};

// The input gradient's B for tap t: (m, e) = dY[b, m, the position tap t
// reads from element e = (b, iy, ix) of the phase] (0 where it reads none),
// one element per thread.
template <int kTile>
struct OutputGradSource {
  using Layout = AlongTile<kTile, RegisterSlices>;
  using Pipeline = RegisterSlices;
  static constexpr int kTileRows = kTile, kPad = Layout::kPad, kRegs = Layout::kRegs;
  const float* dy;
  cpu::ConvGeometry g;
  int groups, group, M, columns;
  StridePhase phase;

  __device__ void Start(int tile0, int, int k_count) {
    const int n = tile0 + Layout::Index();
    ok_ = n < columns;
    phase.Element(g, ok_ ? n : 0, b_, iy_, ix_);
    k_count_ = k_count;
  }
  __device__ void Tap(int t) {
    int oy = 0, ox = 0;
    reads_ = ok_ && TapReads(g, t, iy_, ix_, oy, ox);
    at_ = GroupStart(b_, groups, group, M, size_t{1} * g.OH * g.OW) +
          static_cast<size_t>(oy) * g.OW + ox;
  }
  __device__ void Load(int k0, float (&regs)[kRegs]) {
    const size_t P = static_cast<size_t>(g.OH) * g.OW;
#pragma unroll
    for (int v = 0; v < kRegs; ++v) {
      const int m = k0 + Layout::K(v);
      regs[v] = reads_ && m < k_count_ ? dy[at_ + m * P] : 0.0f;
    }
  }

  __device__ void Store(const float (&regs)[kRegs], float* slice) const {
    Layout::Store(regs, slice);
  }

  // The thread's state, set by Start and Tap.
  size_t at_;
  int b_, iy_, ix_, k_count_;
  bool ok_, reads_;
};

// The input gradient of a phase's elements: per element, the sum from +0 over
// the taps that read an output position, in (ky, kx) order, of that tap's
// chain over m.
struct InputGradSink {
  static constexpr bool kTapSum = true;
  struct ColumnT {
    size_t at;  // the element's offset in dx, channel 0 of the group
    int iy, ix;
  };
  float* dx;
  cpu::ConvGeometry g;
  int groups, group;
  StridePhase phase;

  __device__ void Start(int) {}
  __device__ int Taps() const { return g.KH * g.KW; }
  __device__ bool TapUsed(int t) const { return phase.Reads(g, t); }
  __device__ ColumnT Column(int n) const {
    int b, iy, ix;
    phase.Element(g, n, b, iy, ix);
    return {GroupStart(b, groups, group, g.C, size_t{1} * g.H * g.W) +
                static_cast<size_t>(iy) * g.W + ix,
            iy, ix};
  }
  __device__ bool TapValid(int t, const ColumnT& col) const {
    int oy, ox;
    return TapReads(g, t, col.iy, col.ix, oy, ox);
  }
  __device__ float Init(int, int) const { return 0.0f; }
  __device__ void Store(int c, const ColumnT& col, float v) const {
    dx[col.at + static_cast<size_t>(c) * g.H * g.W] = v;
  }
};

// The weight gradient's A: (m, k = (b, p)) = dY[b, group*M + m, p], one k per
// thread.
template <int kTile>
struct OutputGradRowsSource {
  using Layout = AlongK<kTile, RegisterSlices>;
  using Pipeline = RegisterSlices;
  static constexpr int kTileRows = kTile, kPad = Layout::kPad, kRegs = Layout::kRegs;
  const float* dy;
  cpu::ConvGeometry g;
  int groups, group, M;

  __device__ void Start(int tile0, int k_begin, int k_count) {
    walk_.Start(g, tile0, k_begin, k_count);
  }
  __device__ void Tap(int) {}
  __device__ void Load(int k0, float (&regs)[kRegs]) {
    const bool ok = walk_.Next(g, k0);
    const PositionOdometer& at = walk_.at;
    const size_t P = static_cast<size_t>(g.OH) * g.OW;
    const size_t base =
        GroupStart(at.b, groups, group, M, P) + static_cast<size_t>(at.oy) * g.OW + at.ox;
#pragma unroll
    for (int v = 0; v < kRegs; ++v) {
      const int m = walk_.tile0 + Layout::Index(v);
      regs[v] = ok && m < M ? dy[base + m * P] : 0.0f;
    }
  }

  __device__ void Store(const float (&regs)[kRegs], float* slice) const {
    Layout::Store(regs, slice);
  }

  PositionWalk walk_;  // the thread's state
};

// The weight gradient's B: (k = (b, p), kc) = column (kc, (b, p)), one k per
// thread.
template <int kTile>
struct ColumnsByPositionSource {
  using Layout = AlongK<kTile, RegisterSlices>;
  using Pipeline = RegisterSlices;
  static constexpr int kTileRows = kTile, kPad = Layout::kPad, kRegs = Layout::kRegs;
  const float* x;
  const int2* table;
  cpu::ConvGeometry g;
  int groups, group, kc;

  // The thread's columns stay for the whole block: their taps are read once,
  // so no load of x waits for a table load.
  __device__ void Start(int tile0, int k_begin, int k_count) {
    walk_.Start(g, tile0, k_begin, k_count);
    columns_ = 0;
#pragma unroll
    for (int v = 0; v < kRegs; ++v) {
      const int c = tile0 + Layout::Index(v);
      if (c < kc) columns_ = v + 1;  // Index(v) ascends with v
      taps_[v] = c < kc ? __ldg(table + c) : make_int2(0, 0);
    }
  }
  __device__ void Tap(int) {}
  __device__ void Load(int k0, float (&regs)[kRegs]) {
    const bool ok = walk_.Next(g, k0);
    const PositionOdometer& at = walk_.at;
    const int iy0 = at.oy * g.SH - g.PT, ix0 = at.ox * g.SW - g.PL;
    const ptrdiff_t corner =
        static_cast<ptrdiff_t>(GroupStart(at.b, groups, group, g.C, size_t{1} * g.H * g.W)) +
        static_cast<ptrdiff_t>(iy0) * g.W + ix0;
#pragma unroll
    for (int v = 0; v < kRegs; ++v) {
      const bool real = ok && v < columns_;
      regs[v] = real && Inside(g, iy0, ix0, taps_[v]) ? x[corner + taps_[v].x] : 0.0f;
    }
  }

  __device__ void Store(const float (&regs)[kRegs], float* slice) const {
    Layout::Store(regs, slice);
  }

  // The thread's state, set by Start and Load.
  PositionWalk walk_;
  int2 taps_[kRegs];  // its columns' TapTable entries
  int columns_;       // its first columns_ columns are the product's
};

// The forward product into y with the sources make_a(tile_m) and
// make_b(tile_n): one launch when kc fits a k block; else the blocks' sum
// into channel-major rows cm, then into y. Two blocks per SM in 128x128 tiles
// too: the ring stages nothing in registers, so the gathered columns fit 128
// a thread (at one block an SM, ResNet-50's forward products took 20.78 ms
// against 20.22: BENCHMARKS, issue 19 run 29).
template <class MakeA, class MakeB>
cudaError_t ForwardProduct(int B, int groups, int group, int M, const cpu::ConvGeometry& g,
                           MakeA&& make_a, MakeB&& make_b, const float* bias, float* cm, float* y,
                           cudaStream_t stream) {
  const int kc = g.C * g.KH * g.KW, P = g.OH * g.OW, columns = B * P;
  if (kc <= formulas::kGemmKBlock) {
    const NchwSink sink{y, bias, P, groups * M, group * M, false};
    return cuda::tiled::WithTiles(M, columns, 1, [&](auto tm, auto tn) {
      return cuda::tiled::LaunchTiled<2>(M, columns, kc, 1, make_a(tm), make_b(tn), sink, stream);
    });
  }
  cudaError_t err = FillRows(M, columns, bias, cm, stream);
  if (err == cudaSuccess) {
    err = cuda::tiled::RunTiledDense<2>(M, columns, kc, make_a, make_b, cm, columns, true, stream);
  }
  return err == cudaSuccess ? GroupLayout(B, groups * M, group, M, P, true, cm, y, stream) : err;
}

}  // namespace

cudaError_t ConvTapTable(const cpu::ConvGeometry& g, int2* table, cudaStream_t stream) {
  const int taps = g.KH * g.KW;
  return cuda::LaunchForEach(static_cast<size_t>(g.C) * taps, stream, [=] __device__(size_t e) {
    const int c = static_cast<int>(e / taps), t = static_cast<int>(e % taps);
    const int dy = t / g.KW * g.DH, dx = t % g.KW * g.DW;
    table[e] = make_int2(c * g.H * g.W + dy * g.W + dx, dy << 16 | dx);
  });
}

cudaError_t ConvForward(int B, int groups, int group, int M, const cpu::ConvGeometry& g,
                        const int2* table, const float* x, const float* w, const float* bias,
                        float* wt, float* cm, float* y, cudaStream_t stream) {
  const int kc = g.C * g.KH * g.KW, P = g.OH * g.OW, columns = B * P;
  // A from the weights k-major, wt [kc][M]: the ring copies four filters at
  // once where M keeps them aligned (from W [M][kc] it copied one element a
  // copy).
  cudaError_t err = cuda::Transpose(M, kc, w, wt, stream);
  if (err != cudaSuccess) return err;
  const bool a_vectors = M % 4 == 0 && cuda::Aligned16(wt);
  auto make_a = [&](auto tm) {
    return KMajorSource<tm, DenseIndex>{wt, {}, static_cast<size_t>(M), M, a_vectors};
  };
  if (cpu::IsPointwise(g)) {
    const bool vectors = P % 4 == 0 && cuda::Aligned16(x);
    return ForwardProduct(
        B, groups, group, M, g, make_a,
        [&](auto tn) {
          return KMajorSource<tn, PlaneIndex>{
              x, {groups, group, g.C, P}, size_t{1} * P, columns, vectors};
        },
        bias, cm, y, stream);
  }
  return ForwardProduct(
      B, groups, group, M, g, make_a,
      [&](auto tn) { return ColumnsSource<tn>{x, table, g, groups, group, columns}; }, bias, cm, y,
      stream);
}

cudaError_t ConvInputGrad(int B, int groups, int group, int M, const cpu::ConvGeometry& g,
                          const float* w, const float* dy, float* wt, float* dx,
                          cudaStream_t stream) {
  if (M > formulas::kGemmKBlock) return cudaErrorNotSupported;
  const int taps = g.KH * g.KW, C = g.C, kc = C * taps;
  if (cpu::IsPointwise(g)) {
    // dX's planes = W^T [C][M] x dY's planes, on the forward's ring: A reads
    // W [M][C] k-major (no transposed copy), B dY's planes.
    const int P = g.H * g.W, columns = B * P;
    const bool a_vectors = C % 4 == 0 && cuda::Aligned16(w);
    const bool b_vectors = P % 4 == 0 && cuda::Aligned16(dy);
    const NchwSink sink{dx, nullptr, P, groups * C, group * C, true};
    return cuda::tiled::WithTiles(C, columns, 1, [&](auto tm, auto tn) {
      const KMajorSource<tm, DenseIndex> a{w, {}, size_t{1} * C, C, a_vectors};
      const KMajorSource<tn, PlaneIndex> b{
          dy, {groups, group, M, P}, size_t{1} * P, columns, b_vectors};
      return cuda::tiled::LaunchTiled<2>(C, columns, M, 1, a, b, sink, stream);
    });
  }
  // wt [tap][c][m] = w[m][c][tap]: each tap's A, rows c.
  cudaError_t err =
      cuda::LaunchForEach(static_cast<size_t>(kc) * M, stream, [=] __device__(size_t e) {
        const int m = static_cast<int>(e % M), c = static_cast<int>(e / M % C);
        const int t = static_cast<int>(e / (static_cast<size_t>(M) * C));
        wt[e] = w[static_cast<size_t>(m) * kc + c * taps + t];
      });
  if (err != cudaSuccess) return err;
  const bool wt_vectors = M % 4 == 0 && cuda::Aligned16(wt);
  // One product per stride phase (the phases' elements are disjoint).
  for (int py = 0; py < std::min(g.SH, g.H); ++py) {
    for (int px = 0; px < std::min(g.SW, g.W); ++px) {
      const StridePhase phase{py, px, (g.H - py + g.SH - 1) / g.SH, (g.W - px + g.SW - 1) / g.SW};
      const int columns = B * phase.rows * phase.cols;
      bool read = false;
      for (int t = 0; t < taps && !read; ++t) read = phase.Reads(g, t);
      if (!read) {
        // No tap reads the phase (a 1x1 kernel's strides skip it): its sums
        // over no taps are +0, stored without a product.
        const size_t plane = static_cast<size_t>(g.H) * g.W;
        err =
            cuda::LaunchForEach(static_cast<size_t>(C) * columns, stream, [=] __device__(size_t e) {
              int b, iy, ix;
              phase.Element(g, static_cast<int>(e % columns), b, iy, ix);
              dx[GroupStart(b, groups, group, C, plane) + e / columns * plane +
                 static_cast<size_t>(iy) * g.W + ix] = 0.0f;
            });
        if (err != cudaSuccess) return err;
        continue;
      }
      const InputGradSink sink{dx, g, groups, group, phase};
      err = cuda::tiled::WithTiles(C, columns, 1, [&](auto tm, auto tn) {
        const RowsSource<tm, RegisterSlices> a{wt, M, C, static_cast<size_t>(C) * M, wt_vectors};
        const OutputGradSource<tn> b{dy, g, groups, group, M, columns, phase};
        return cuda::tiled::LaunchTiled<1>(C, columns, M, 1, a, b, sink, stream);
      });
      if (err != cudaSuccess) return err;
    }
  }
  return cudaSuccess;
}

cudaError_t ConvWeightGrad(int B, int groups, int group, int M, const cpu::ConvGeometry& g,
                           int k_block, const int2* table, const float* x, const float* dy,
                           float* dw, cudaStream_t stream) {
  const int kc = g.C * g.KH * g.KW;
  // 128x128 tiles at one block an SM: capped at two, the registers spilled
  // (104 bytes a thread; their FMA pipes 38-40% busy) and ResNet-50's step
  // ran 3% slower (BENCHMARKS, issue 19 run 29).
  return cuda::tiled::RunTiledDense<1>(
      M, kc, B * g.OH * g.OW,
      [&](auto tm) {
        return OutputGradRowsSource<tm>{dy, g, groups, group, M};
      },
      [&](auto tn) { return ColumnsByPositionSource<tn>{x, table, g, groups, group, kc}; }, dw, kc,
      false, stream, k_block);
}

// The depthwise kernels take an element's channel, position and plane from
// LaunchForEachInChannels (no 64-bit divisions) and walk the taps as (ky, kx)
// loops, testing a kernel row once for all its columns.
cudaError_t DepthwiseForward(int B, int groups, const cpu::ConvGeometry& g, const float* x,
                             const float* w, const float* bias, float* y, cudaStream_t stream) {
  const size_t P = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  const int taps = g.KH * g.KW;
  return cuda::LaunchForEachInChannels(
      B, groups, P, stream, [=] __device__(size_t e, unsigned channel, unsigned p, size_t plane) {
        const int oy = static_cast<int>(p) / g.OW, ox = static_cast<int>(p) - oy * g.OW;
        const int iy0 = oy * g.SH - g.PT, ix0 = ox * g.SW - g.PL;
        const float* img = x + plane * image;
        const float* wc = w + static_cast<size_t>(channel) * taps;
        // Padding taps take fma(w, 0, acc) too, as the columns' product does.
        float acc = bias != nullptr ? bias[channel] : 0.0f;
        for (int ky = 0; ky < g.KH; ++ky) {
          const int iy = iy0 + ky * g.DH;
          const bool row_inside = static_cast<unsigned>(iy) < static_cast<unsigned>(g.H);
          for (int kx = 0; kx < g.KW; ++kx) {
            const int ix = ix0 + kx * g.DW;
            const bool inside =
                row_inside && static_cast<unsigned>(ix) < static_cast<unsigned>(g.W);
            acc = __fmaf_rn(wc[ky * g.KW + kx], inside ? img[iy * g.W + ix] : 0.0f, acc);
          }
        }
        y[e] = acc;
      });
}

cudaError_t DepthwiseInputGrad(int B, int groups, const cpu::ConvGeometry& g, const float* w,
                               const float* dy, float* dx, cudaStream_t stream) {
  const size_t P = static_cast<size_t>(g.OH) * g.OW, image = static_cast<size_t>(g.H) * g.W;
  const int taps = g.KH * g.KW;
  return cuda::LaunchForEachInChannels(
      B, groups, image, stream,
      [=] __device__(size_t e, unsigned channel, unsigned pix, size_t plane) {
        const int iy = static_cast<int>(pix) / g.W, ix = static_cast<int>(pix) - iy * g.W;
        const float* wc = w + static_cast<size_t>(channel) * taps;
        const float* plane_dy = dy + plane * P;
        float sum = 0.0f;
        for (int ky = 0; ky < g.KH; ++ky) {
          const int oy = RowReads(g, iy, ky);
          if (oy < 0) continue;
          for (int kx = 0; kx < g.KW; ++kx) {
            const int ox = ColumnReads(g, ix, kx);
            if (ox >= 0) sum += __fmaf_rn(wc[ky * g.KW + kx], plane_dy[oy * g.OW + ox], 0.0f);
          }
        }
        dx[e] = sum;
      });
}

cudaError_t DepthwiseWeightGrad(int B, int groups, const cpu::ConvGeometry& g, int k_block,
                                const float* x, const float* dy, float* dw, cudaStream_t stream) {
  const int taps = g.KH * g.KW, P = g.OH * g.OW, K = B * P;
  const int blocks = cuda::tiled::KBlocks(K, k_block);
  const size_t chains = static_cast<size_t>(blocks) * groups * taps;
  // One thread per (k block, channel, tap): the block's chain over its k in
  // k = (b, oy, ox) order, an output row at a time, so a row's inside test and
  // pointers are computed once. (Three taps of a kernel row a thread, sharing
  // dY's loads, ran slower: a third of the threads for chains of up to 4,096
  // k; BENCHMARKS, issue 19 run 31.)
  auto chains_into = [&](float* parts) {
    return cuda::LaunchForEach(chains, stream, [=] __device__(size_t e) {
      const int t = static_cast<int>(e % taps);
      const size_t chain_set = e / taps;  // block * groups + channel
      const int channel = static_cast<int>(chain_set % groups);
      const int block = static_cast<int>(chain_set / groups);
      const int k1 = min(K, (block + 1) * k_block);
      const int row_tap = t / g.KW * g.DH - g.PT, column_tap = t % g.KW * g.DW - g.PL;
      PositionOdometer at;
      at.Start(g, block * k_block);
      float acc = 0.0f;
      for (int k = block * k_block; k < k1;) {
        const int n = min(g.OW - at.ox, k1 - k);
        const size_t plane = static_cast<size_t>(at.b) * groups + channel;
        const int iy = at.oy * g.SH + row_tap;
        const bool row_inside = static_cast<unsigned>(iy) < static_cast<unsigned>(g.H);
        const float* x_row = x + (plane * g.H + (row_inside ? iy : 0)) * g.W;
        const float* dy_row = dy + plane * P + static_cast<size_t>(at.oy) * g.OW;
        int ix = at.ox * g.SW + column_tap;
#pragma unroll 4
        for (int j = at.ox; j < at.ox + n; ++j, ix += g.SW) {
          const bool inside = row_inside && static_cast<unsigned>(ix) < static_cast<unsigned>(g.W);
          acc = __fmaf_rn(inside ? x_row[ix] : 0.0f, dy_row[j], acc);
        }
        k += n;
        at.Advance(g, n);
      }
      parts[e] = acc;
    });
  };
  if (blocks == 1) return chains_into(dw);
  return cuda::WithStreamScratch(chains, stream, [&](float* parts) {
    const cudaError_t err = chains_into(parts);
    return err == cudaSuccess ? cuda::SumParts(groups, taps, blocks, parts, dw, taps, stream) : err;
  });
}

cudaError_t ConvFoldColumns(int B, int groups, int group, const cpu::ConvGeometry& g,
                            const float* cols, float* dx, cudaStream_t stream) {
  const size_t P = static_cast<size_t>(g.OH) * g.OW, width = B * P;
  const size_t image = static_cast<size_t>(g.H) * g.W;
  return cuda::LaunchForEach(B * g.C * image, stream, [=] __device__(size_t e) {
    const size_t b = e / (g.C * image);
    const int c = static_cast<int>(e / image % g.C);
    const int iy = static_cast<int>(e % image / g.W), ix = static_cast<int>(e % g.W);
    // Each tap reads this element from at most one output position: taps in
    // (ky, kx) order, the sum from 0.
    float sum = 0.0f;
    for (int t = 0; t < g.KH * g.KW; ++t) {
      int oy, ox;
      if (!TapReads(g, t, iy, ix, oy, ox)) continue;
      const size_t row = static_cast<size_t>(c) * g.KH * g.KW + t;
      sum += cols[row * width + b * P + static_cast<size_t>(oy) * g.OW + ox];
    }
    dx[((b * groups + group) * g.C + c) * image + e % image] = sum;
  });
}

cudaError_t FillRows(int rows, size_t cols, const float* per_row, float* cm, cudaStream_t stream) {
  return cuda::LaunchForEach(rows * cols, stream, [=] __device__(size_t e) {
    cm[e] = per_row != nullptr ? per_row[e / cols] : 0.0f;
  });
}

cudaError_t GroupLayout(int B, int total, int group, int M, int P, bool to_nchw, const float* src,
                        float* dst, cudaStream_t stream) {
  const size_t width = static_cast<size_t>(B) * P;
  return cuda::LaunchForEach(M * width, stream, [=] __device__(size_t e) {
    const size_t m = e / width, b = e % width / P, p = e % P;
    const size_t nchw = (b * total + static_cast<size_t>(group) * M + m) * P + p;
    if (to_nchw) {
      dst[nchw] = src[e];
    } else {
      dst[e] = src[nchw];
    }
  });
}

}  // namespace easyscale::graph::cuda_ops
