#include "easyscale/worker/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__AVX__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "easyscale/worker/detmath.h"
#include "easyscale/worker/kernel_formulas.h"
#include "easyscale/worker/philox.h"

namespace easyscale::cpu {

using detmath::Fma;

namespace {

// A channel's sums in the two-level order of cpu_kernels.h: per sample, a chain
// of fold(a, b, part) over the positions from 0, then the samples' results in
// sample order from 0 (the CUDA SampleSums runs the same, a lane a sample).
// b may be null (one input).
// G samples' chains side by side, each its own, so that they overlap in the
// pipeline instead of waiting on one add's latency; then added in order.
template <int G, int NSum, typename Fold>
void SampleChains(int first, int C, int P, int c, const float* a, const float* b, Fold fold,
                  float (&total)[NSum]) {
  const float* ra[G];
  const float* rb[G];
  for (int j = 0; j < G; ++j) {
    const size_t row = (static_cast<size_t>(first + j) * C + c) * P;
    ra[j] = a + row;
    rb[j] = b != nullptr ? b + row : ra[j];
  }
  float part[G][NSum] = {};
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
    for (int j = 0; j < G; ++j) fold(ra[j][p], rb[j][p], part[j]);
  }
  for (int j = 0; j < G; ++j) {
    for (int s = 0; s < NSum; ++s) total[s] += part[j][s];
  }
}

template <int NSum, typename Fold>
void ChannelSums(int B, int C, int P, int c, const float* a, const float* b, Fold fold,
                 float (&total)[NSum]) {
  constexpr int kGroup = 8;
  for (float& t : total) t = 0.0f;
  int sample = 0;
  for (; sample + kGroup <= B; sample += kGroup) {
    SampleChains<kGroup>(sample, C, P, c, a, b, fold, total);
  }
  for (; sample < B; ++sample) SampleChains<1>(sample, C, P, c, a, b, fold, total);
}

}  // namespace

namespace {

#if defined(__AVX__) && defined(__FMA__)
// Register tiles of Mr (<= kMr) rows x kNr columns of C (their first `cols`
// columns, 1..kNr, when Masked): each continues every element's fma chain
// (one rounding, as Fma) over k in [k0, k1) ascending from C, or from 0 when
// !from_c. A tile only shares the loads of A and B between elements, so the
// tiles of any vector width give the same bits.
constexpr bool kTiled = true;
constexpr int kMr = 6;

struct Avx2Tiles {
  static constexpr int kNr = 16;
  template <int Mr, bool Masked>
  static void Tile(int k0, int k1, const float* A, int lda, const float* B, int ldb, float* C,
                   int ldc, bool from_c, int cols) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), lane);
    auto load = [&](const float* p, __m256i m) {
      return Masked ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p);
    };
    __m256 acc[Mr][2];
#pragma GCC unroll 8
    for (int r = 0; r < Mr; ++r) {
      const float* c = C + static_cast<size_t>(r) * ldc;
      acc[r][0] = from_c ? load(c, m0) : _mm256_setzero_ps();
      acc[r][1] = from_c ? load(c + 8, m1) : _mm256_setzero_ps();
    }
    for (int k = k0; k < k1; ++k) {
      const float* b = B + static_cast<size_t>(k) * ldb;
      const __m256 b0 = load(b, m0), b1 = load(b + 8, m1);
#pragma GCC unroll 8
      for (int r = 0; r < Mr; ++r) {
        const __m256 a = _mm256_broadcast_ss(A + static_cast<size_t>(r) * lda + k);
        acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < Mr; ++r) {
      float* c = C + static_cast<size_t>(r) * ldc;
      if (Masked) {
        _mm256_maskstore_ps(c, m0, acc[r][0]);
        _mm256_maskstore_ps(c + 8, m1, acc[r][1]);
      } else {
        _mm256_storeu_ps(c, acc[r][0]);
        _mm256_storeu_ps(c + 8, acc[r][1]);
      }
    }
  }
};

// The first n (any int) of 16 lanes.
constexpr __mmask16 FirstLanes(int n) {
  return n <= 0 ? 0 : n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1);
}

// Built for AVX-512 whatever the build's flags; run only where the CPU has it.
struct Avx512Tiles {
  static constexpr int kNr = 32;
  template <int Mr, bool Masked>
  __attribute__((target("avx512f"))) static void Tile(int k0, int k1, const float* A, int lda,
                                                      const float* B, int ldb, float* C, int ldc,
                                                      bool from_c, int cols) {
    const __mmask16 m0 = FirstLanes(cols), m1 = FirstLanes(cols - 16);
    __m512 acc[Mr][2];
#pragma GCC unroll 8
    for (int r = 0; r < Mr; ++r) {
      const float* c = C + static_cast<size_t>(r) * ldc;
      acc[r][0] = !from_c  ? _mm512_setzero_ps()
                  : Masked ? _mm512_maskz_loadu_ps(m0, c)
                           : _mm512_loadu_ps(c);
      acc[r][1] = !from_c  ? _mm512_setzero_ps()
                  : Masked ? _mm512_maskz_loadu_ps(m1, c + 16)
                           : _mm512_loadu_ps(c + 16);
    }
    for (int k = k0; k < k1; ++k) {
      const float* b = B + static_cast<size_t>(k) * ldb;
      const __m512 b0 = Masked ? _mm512_maskz_loadu_ps(m0, b) : _mm512_loadu_ps(b);
      const __m512 b1 = Masked ? _mm512_maskz_loadu_ps(m1, b + 16) : _mm512_loadu_ps(b + 16);
#pragma GCC unroll 8
      for (int r = 0; r < Mr; ++r) {
        const __m512 a = _mm512_set1_ps(A[static_cast<size_t>(r) * lda + k]);
        acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < Mr; ++r) {
      float* c = C + static_cast<size_t>(r) * ldc;
      if (Masked) {
        _mm512_mask_storeu_ps(c, m0, acc[r][0]);
        _mm512_mask_storeu_ps(c + 16, m1, acc[r][1]);
      } else {
        _mm512_storeu_ps(c, acc[r][0]);
        _mm512_storeu_ps(c + 16, acc[r][1]);
      }
    }
  }
};

// Rows [0, rows) (rows <= kMr) of a column panel of `cols` (<= Tiles::kNr).
template <typename Tiles, bool Masked>
void GemmPanel(int rows, int k0, int k1, const float* A, int lda, const float* B, int ldb, float* C,
               int ldc, bool from_c, int cols) {
  switch (rows) {
    case 6:
      return Tiles::template Tile<6, Masked>(k0, k1, A, lda, B, ldb, C, ldc, from_c, cols);
    case 5:
      return Tiles::template Tile<5, Masked>(k0, k1, A, lda, B, ldb, C, ldc, from_c, cols);
    case 4:
      return Tiles::template Tile<4, Masked>(k0, k1, A, lda, B, ldb, C, ldc, from_c, cols);
    case 3:
      return Tiles::template Tile<3, Masked>(k0, k1, A, lda, B, ldb, C, ldc, from_c, cols);
    case 2:
      return Tiles::template Tile<2, Masked>(k0, k1, A, lda, B, ldb, C, ldc, from_c, cols);
    default:
      return Tiles::template Tile<1, Masked>(k0, k1, A, lda, B, ldb, C, ldc, from_c, cols);
  }
}

// C continues its chains over k in [k0, k1) (from 0 when !from_c), in blocks
// of kMc rows: a block's rows of A stay in L2 across B's column panels, and a
// panel of B in L1 across the block's row tiles. The order of tiles never
// changes an element's chain.
template <typename Tiles>
void GemmChunk(int M, int N, int k0, int k1, const float* A, int lda, const float* B, int ldb,
               float* C, int ldc, bool from_c) {
  constexpr int kMc = 16 * kMr;
  for (int i0 = 0; i0 < M; i0 += kMc) {
    const int i1 = std::min(M, i0 + kMc);
    for (int j = 0; j < N; j += Tiles::kNr) {
      const int cols = std::min(Tiles::kNr, N - j);
      for (int i = i0; i < i1; i += kMr) {
        const int rows = std::min(kMr, i1 - i);
        const float* a = A + static_cast<size_t>(i) * lda;
        float* c = C + static_cast<size_t>(i) * ldc + j;
        if (cols == Tiles::kNr) {
          GemmPanel<Tiles, false>(rows, k0, k1, a, lda, B + j, ldb, c, ldc, from_c, cols);
        } else {
          GemmPanel<Tiles, true>(rows, k0, k1, a, lda, B + j, ldb, c, ldc, from_c, cols);
        }
      }
    }
  }
}
#else
constexpr bool kTiled = false;  // GemmRows does all
#endif

// Rows [i0, i1) and columns [j0, j1) of C, a row at a time: loop order i, k,
// j, so every C[i,j] still sees each k block ascending and the inner loop runs
// over contiguous j. Blocks after the first chain into `part`, then add.
void GemmRows(int i0, int i1, int j0, int j1, int K, const float* A, int lda, const float* B,
              int ldb, float* C, int ldc, bool accumulate) {
  constexpr int kBlockN = 256;
  float part[kBlockN];
  // c[0..n) += the chain over k in [k0, k1) of a[k] * B[k, jb..jb+n).
  auto chain = [&](const float* a, int k0, int k1, int jb, int n, float* __restrict c) {
    for (int k = k0; k < k1; ++k) {
      const float aik = a[k];
      const float* __restrict b = B + static_cast<size_t>(k) * ldb + jb;
      for (int j = 0; j < n; ++j) c[j] = Fma(aik, b[j], c[j]);
    }
  };
  for (int jb = j0; jb < j1; jb += kBlockN) {
    const int n = std::min(j1 - jb, kBlockN);
    for (int i = i0; i < i1; ++i) {
      float* __restrict c = C + static_cast<size_t>(i) * ldc + jb;
      if (!accumulate) std::fill(c, c + n, 0.0f);
      const float* a = A + static_cast<size_t>(i) * lda;
      chain(a, 0, std::min(K, formulas::kGemmKBlock), jb, n, c);
      for (int k0 = formulas::kGemmKBlock; k0 < K; k0 += formulas::kGemmKBlock) {
        std::fill(part, part + n, 0.0f);
        chain(a, k0, std::min(K, k0 + formulas::kGemmKBlock), jb, n, part);
        for (int j = 0; j < n; ++j) c[j] += part[j];
      }
    }
  }
}

}  // namespace

bool CanRun(GemmTiles tiles) {
  if (tiles == GemmTiles::kRows) return true;
  if (!kTiled) return false;
  return tiles == GemmTiles::kAvx2 || __builtin_cpu_supports("avx512f");
}

void Gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
          bool accumulate) {
  static const GemmTiles widest = CanRun(GemmTiles::kAvx512) ? GemmTiles::kAvx512
                                  : CanRun(GemmTiles::kAvx2) ? GemmTiles::kAvx2
                                                             : GemmTiles::kRows;
  GemmWith(widest, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

void GemmWith(GemmTiles tiles, int M, int N, int K, const float* A, int lda, const float* B,
              int ldb, float* C, int ldc, bool accumulate) {
  if (tiles == GemmTiles::kRows || !CanRun(tiles)) {
    return GemmRows(0, M, 0, N, K, A, lda, B, ldb, C, ldc, accumulate);
  }
#if defined(__AVX__) && defined(__FMA__)
  const auto chunk = tiles == GemmTiles::kAvx512 ? GemmChunk<Avx512Tiles> : GemmChunk<Avx2Tiles>;
  // k in chunks that fit the cache, inside GemmOutput's blocks: block 0's
  // chains run in C; a later block's run from 0 in `part`, added to C at the
  // block's end. Each element gets GemmOutput's operations whatever its tile.
  constexpr int kChunk = 256;
  static_assert(formulas::kGemmKBlock % kChunk == 0, "chunks never straddle a k block");
  std::vector<float> part;
  if (K > formulas::kGemmKBlock) part.resize(static_cast<size_t>(M) * N);
  for (int k0 = 0; k0 == 0 || k0 < K; k0 += kChunk) {
    const int k1 = std::min(K, k0 + kChunk);
    const bool first_block = k0 < formulas::kGemmKBlock;
    const bool block_start = k0 % formulas::kGemmKBlock == 0;
    if (first_block) {
      chunk(M, N, k0, k1, A, lda, B, ldb, C, ldc, !block_start || accumulate);
      continue;
    }
    chunk(M, N, k0, k1, A, lda, B, ldb, part.data(), N, !block_start);
    if (k1 == K || k1 % formulas::kGemmKBlock == 0) {
      for (int i = 0; i < M; ++i) {
        float* c = C + static_cast<size_t>(i) * ldc;
        const float* p = part.data() + static_cast<size_t>(i) * N;
        for (int j = 0; j < N; ++j) c[j] += p[j];
      }
    }
  }
#endif
}

void Transpose(int rows, int cols, const float* src, float* dst) {
  // In square blocks, so that both the rows read and the rows written stay in
  // cache lines already loaded.
  constexpr int kBlock = 16;
  for (int r0 = 0; r0 < rows; r0 += kBlock) {
    const int r1 = std::min(rows, r0 + kBlock);
    for (int c0 = 0; c0 < cols; c0 += kBlock) {
      const int c1 = std::min(cols, c0 + kBlock);
      for (int c = c0; c < c1; ++c) {
        float* __restrict out = dst + static_cast<size_t>(c) * rows;
        for (int r = r0; r < r1; ++r) out[r] = src[static_cast<size_t>(r) * cols + c];
      }
    }
  }
}

namespace {

// A channel as the taps see it: hp x wp, x[r - PT, c - PL] inside the image
// and 0 in its padding, covering every tap of every output.
struct PaddedPlane {
  explicit PaddedPlane(const ConvGeometry& g)
      : hp((g.OH - 1) * g.SH + (g.KH - 1) * g.DH + 1),
        wp((g.OW - 1) * g.SW + (g.KW - 1) * g.DW + 1),
        rows(std::max(0, std::min(g.H, hp - g.PT))),
        cols(std::max(0, std::min(g.W, wp - g.PL))) {}
  // The plane's element for the image's row 0, column 0.
  size_t Origin(const ConvGeometry& g) const { return static_cast<size_t>(g.PT) * wp + g.PL; }
  int hp, wp;
  int rows, cols;  // the image's rows and columns some tap reads
};

thread_local std::vector<float> plane;  // scratch for one PaddedPlane

}  // namespace

namespace {

// A stride-1, undilated convolution whose output has the image's size.
bool SameSizeUnitStride(const ConvGeometry& g) {
  return g.SH == 1 && g.SW == 1 && g.DH == 1 && g.DW == 1 && g.OH == g.H && g.OW == g.W;
}

// Such a convolution's output positions [lo, hi) along a dimension of n whose
// input position, shifted by `shift` (ky - PT or kx - PL), is inside the image.
std::pair<int, int> InsideShifted(int shift, int n) {
  const int lo = std::clamp(-shift, 0, n);
  return {lo, std::clamp(n - shift, lo, n)};
}

// Im2ColImage of a stride-1, undilated convolution whose output has the
// image's size: each row of cols is the channel shifted by (ky - PT, kx - PL)
// as one flat copy, then zeros where the shift leaves the image (whole output
// rows above or below it, and the first or last columns of the rows between).
void Im2ColSameSize(const ConvGeometry& g, const float* x, float* cols, size_t ld) {
  const int H = g.H, W = g.W;
  for (int c = 0; c < g.C; ++c) {
    const float* img = x + static_cast<size_t>(c) * H * W;
    for (int ky = 0; ky < g.KH; ++ky) {
      const auto [oy0, oy1] = InsideShifted(ky - g.PT, H);
      for (int kx = 0; kx < g.KW; ++kx) {
        float* row = cols + (static_cast<size_t>(c * g.KH + ky) * g.KW + kx) * ld;
        const int dx = kx - g.PL;  // output column ox reads image column ox + dx
        std::fill(row, row + static_cast<size_t>(oy0) * W, 0.0f);
        std::fill(row + static_cast<size_t>(oy1) * W, row + static_cast<size_t>(H) * W, 0.0f);
        if (oy0 == oy1) continue;
        // The flat copy, less the elements before the image's start or past its
        // end (both are columns the zeros below cover).
        const ptrdiff_t shift = static_cast<ptrdiff_t>(ky - g.PT) * W + dx;
        ptrdiff_t first = static_cast<ptrdiff_t>(oy0) * W, last = static_cast<ptrdiff_t>(oy1) * W;
        first = std::max(first, -shift);
        last = std::min(last, static_cast<ptrdiff_t>(H) * W - shift);
        if (first < last)
          std::memcpy(row + first, img + first + shift, sizeof(float) * (last - first));
        const auto [lo, hi] = InsideShifted(dx, W);
        // Column by column: a few strided stores, not a library call per row.
        const auto zero_column = [&](int ox) {
          for (int oy = oy0; oy < oy1; ++oy) row[static_cast<size_t>(oy) * W + ox] = 0.0f;
        };
        for (int ox = 0; ox < lo; ++ox) zero_column(ox);
        for (int ox = hi; ox < W; ++ox) zero_column(ox);
      }
    }
  }
}

}  // namespace

void Im2ColImage(const ConvGeometry& g, const float* x, float* cols, size_t ld) {
  if (SameSizeUnitStride(g)) {
    return Im2ColSameSize(g, x, cols, ld);
  }
  // Each channel goes once into a zero-bordered plane (only its interior is
  // rewritten), so each row of cols is a plain copy with no bounds tests.
  const PaddedPlane pp(g);
  plane.assign(static_cast<size_t>(pp.hp) * pp.wp, 0.0f);
  for (int c = 0; c < g.C; ++c) {
    const float* img = x + static_cast<size_t>(c) * g.H * g.W;
    float* inner = plane.data() + pp.Origin(g);
    for (int r = 0; r < pp.rows; ++r) {
      std::copy_n(img + static_cast<size_t>(r) * g.W, pp.cols,
                  inner + static_cast<size_t>(r) * pp.wp);
    }
    for (int ky = 0; ky < g.KH; ++ky) {
      for (int kx = 0; kx < g.KW; ++kx) {
        float* __restrict row = cols + (static_cast<size_t>(c * g.KH + ky) * g.KW + kx) * ld;
        for (int oy = 0; oy < g.OH; ++oy, row += g.OW) {
          const float* __restrict src =
              plane.data() + static_cast<size_t>(oy * g.SH + ky * g.DH) * pp.wp + kx * g.DW;
          if (g.SW == 1) {
            for (int ox = 0; ox < g.OW; ++ox) row[ox] = src[ox];
          } else {
            for (int ox = 0; ox < g.OW; ++ox) row[ox] = src[ox * g.SW];
          }
        }
      }
    }
  }
}

namespace {

// Col2ImImage of the convolutions Im2ColSameSize serves: each (ky, kx) row of
// cols adds, in (ky, kx) order, into the image elements its shift lands on
// inside the image (what would land in the padding is never added).
void Col2ImSameSize(const ConvGeometry& g, const float* cols, size_t ld, float* dx) {
  const int H = g.H, W = g.W;
  std::fill(dx, dx + static_cast<size_t>(g.C) * H * W, 0.0f);
  for (int c = 0; c < g.C; ++c) {
    float* img = dx + static_cast<size_t>(c) * H * W;
    for (int ky = 0; ky < g.KH; ++ky) {
      const auto [oy0, oy1] = InsideShifted(ky - g.PT, H);
      for (int kx = 0; kx < g.KW; ++kx) {
        const float* row = cols + (static_cast<size_t>(c * g.KH + ky) * g.KW + kx) * ld;
        const int shift = kx - g.PL;
        const auto [lo, hi] = InsideShifted(shift, W);
        for (int oy = oy0; oy < oy1; ++oy) {
          const float* __restrict src = row + static_cast<size_t>(oy) * W;
          float* __restrict dst = img + static_cast<size_t>(oy + ky - g.PT) * W + shift;
          for (int ox = lo; ox < hi; ++ox) dst[ox] += src[ox];
        }
      }
    }
  }
}

}  // namespace

void Col2ImImage(const ConvGeometry& g, const float* cols, size_t ld, float* dx) {
  if (SameSizeUnitStride(g)) {
    return Col2ImSameSize(g, cols, ld, dx);
  }
  // Sums in a zero-bordered plane (per element the same adds, in (ky, kx)
  // order, from 0); what lands in the padding is dropped.
  const PaddedPlane pp(g);
  std::fill(dx, dx + static_cast<size_t>(g.C) * g.H * g.W, 0.0f);
  for (int c = 0; c < g.C; ++c) {
    plane.assign(static_cast<size_t>(pp.hp) * pp.wp, 0.0f);
    for (int ky = 0; ky < g.KH; ++ky) {
      for (int kx = 0; kx < g.KW; ++kx) {
        const float* __restrict row = cols + (static_cast<size_t>(c * g.KH + ky) * g.KW + kx) * ld;
        for (int oy = 0; oy < g.OH; ++oy, row += g.OW) {
          float* __restrict dst =
              plane.data() + static_cast<size_t>(oy * g.SH + ky * g.DH) * pp.wp + kx * g.DW;
          if (g.SW == 1) {
            for (int ox = 0; ox < g.OW; ++ox) dst[ox] += row[ox];
          } else {
            for (int ox = 0; ox < g.OW; ++ox) dst[ox * g.SW] += row[ox];
          }
        }
      }
    }
    float* img = dx + static_cast<size_t>(c) * g.H * g.W;
    const float* inner = plane.data() + pp.Origin(g);
    for (int r = 0; r < pp.rows; ++r) {
      std::copy_n(inner + static_cast<size_t>(r) * pp.wp, pp.cols,
                  img + static_cast<size_t>(r) * g.W);
    }
  }
}

void ChannelSum(int B, int C, int P, const float* dy, float* bias_grad) {
  for (int c = 0; c < C; ++c) {
    float s[1];
    ChannelSums(
        B, C, P, c, dy, nullptr, [](float v, float, float(&part)[1]) { part[0] += v; }, s);
    bias_grad[c] = s[0];
  }
}

void BatchNormTrain(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                    float eps, float momentum, float* running_mean, float* running_var, float* y,
                    float* save_mean, float* save_invstd) {
  const float count = static_cast<float>(B) * static_cast<float>(P);
  for (int c = 0; c < C; ++c) {
    float sum[1], sq[1];
    ChannelSums(
        B, C, P, c, x, nullptr, [](float v, float, float(&part)[1]) { part[0] += v; }, sum);
    const float mean = sum[0] / count;
    ChannelSums(
        B, C, P, c, x, nullptr,
        [mean](float v, float, float(&part)[1]) {
          formulas::FoldSquaredDeviation(v, mean, &part[0]);
        },
        sq);
    save_mean[c] = mean;
    formulas::BatchNormFinish(mean, sq[0], count, eps, momentum, &save_invstd[c], &running_mean[c],
                              &running_var[c]);
    const float scale = gamma[c] * save_invstd[c];
    for (int b = 0; b < B; ++b) {
      const size_t off = (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p)
        y[off + p] = formulas::BatchNormOutput(x[off + p], mean, scale, beta[c]);
    }
  }
}

void BatchNormEval(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                   float eps, const float* running_mean, const float* running_var, float* y) {
  for (int c = 0; c < C; ++c) {
    const float scale = gamma[c] * formulas::InvStd(running_var[c], eps);
    for (int b = 0; b < B; ++b) {
      const size_t off = (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p)
        y[off + p] = formulas::BatchNormOutput(x[off + p], running_mean[c], scale, beta[c]);
    }
  }
}

void BatchNormEvalBackward(int B, int C, int P, const float* x, const float* dy, const float* gamma,
                           float eps, const float* running_mean, const float* running_var,
                           float* dx, float* dgamma, float* dbeta) {
  for (int c = 0; c < C; ++c) {
    const float mean = running_mean[c], invstd = formulas::InvStd(running_var[c], eps);
    if (dgamma != nullptr || dbeta != nullptr) {
      float sums[2];  // sum of dy, sum of dy * xhat
      ChannelSums(
          B, C, P, c, x, dy,
          [mean, invstd](float xv, float dyv, float(&part)[2]) {
            formulas::FoldBatchNormGrads(xv, dyv, mean, invstd, &part[0], &part[1]);
          },
          sums);
      if (dgamma != nullptr) dgamma[c] = sums[1];
      if (dbeta != nullptr) dbeta[c] = sums[0];
    }
    if (dx == nullptr) continue;
    const float scale = gamma[c] * invstd;
    for (int b = 0; b < B; ++b) {
      const size_t off = (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p) dx[off + p] = dy[off + p] * scale;
    }
  }
}

void BatchNormBackward(int B, int C, int P, const float* x, const float* dy, const float* gamma,
                       const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                       float* dbeta) {
  const float count = static_cast<float>(B) * static_cast<float>(P);
  for (int c = 0; c < C; ++c) {
    const float mean = save_mean[c], invstd = save_invstd[c];
    float sums[2];  // sum of dy, sum of dy * xhat
    ChannelSums(
        B, C, P, c, x, dy,
        [mean, invstd](float xv, float dyv, float(&part)[2]) {
          formulas::FoldBatchNormGrads(xv, dyv, mean, invstd, &part[0], &part[1]);
        },
        sums);
    const float sum_dy = sums[0], sum_dy_xhat = sums[1];
    dgamma[c] = sum_dy_xhat;
    dbeta[c] = sum_dy;
    const float k = gamma[c] * invstd / count;
    for (int b = 0; b < B; ++b) {
      const size_t off = (static_cast<size_t>(b) * C + c) * P;
      for (int p = 0; p < P; ++p) {
        dx[off + p] = formulas::BatchNormInputGrad(x[off + p], dy[off + p], mean, invstd, k, count,
                                                   sum_dy, sum_dy_xhat);
      }
    }
  }
}

void Dropout(size_t n, float p, uint32_t key0, uint32_t key1, uint64_t counter_base, const float* x,
             const float* residual, float* y, uint8_t* kept) {
  const float scale = 1.0f / (1.0f - p);
  unsigned block = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % 4 == 0) block = formulas::DropoutKeptBits({key0, key1}, counter_base + i / 4, p);
    kept[i] = (block >> (i % 4)) & 1u;
    const float dropped = x[i] * formulas::DropoutScale(kept[i], scale);
    y[i] = residual != nullptr ? residual[i] + dropped : dropped;
  }
}

void DropoutBackward(size_t n, float p, const uint8_t* kept, const float* dy, float* dx) {
  const float scale = 1.0f / (1.0f - p);
  for (size_t i = 0; i < n; ++i) dx[i] = dy[i] * formulas::DropoutScale(kept[i], scale);
}

float SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                          float* dlogits) {
  float total = 0.0f;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (int r = 0; r < rows; ++r) {
    total += formulas::SoftmaxCrossEntropyRow(classes, logits + static_cast<size_t>(r) * classes,
                                              labels[r], inv_rows,
                                              dlogits + static_cast<size_t>(r) * classes);
  }
  return total * inv_rows;
}

void Argmax(int rows, int classes, const float* logits, int32_t* out) {
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<size_t>(r) * classes;
    int best = 0;
    for (int c = 1; c < classes; ++c) {
      if (z[c] > z[best]) best = c;
    }
    out[r] = best;
  }
}

}  // namespace easyscale::cpu
