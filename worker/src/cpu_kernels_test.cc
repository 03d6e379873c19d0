#include "easyscale/worker/cpu_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "easyscale/worker/kernel_formulas.h"
#include "easyscale/worker/philox.h"

namespace easyscale {
namespace {

std::vector<float> Random(size_t n, uint64_t seed) {
  PhiloxStream r(DeriveKey(seed, 1), 0);
  std::vector<float> v(n);
  for (float& x : v) x = 2.0f * r.NextUniform() - 1.0f;
  return v;
}

TEST(Gemm, EqualsScalarFmaChainInKOrder) {
  const int M = 7, N = 300, K = 33;
  auto A = Random(M * K, 1), B = Random(K * N, 2);
  std::vector<float> C(M * N);
  cpu::Gemm(M, N, K, A.data(), K, B.data(), N, C.data(), N, false);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < K; ++k) acc = std::fma(A[i * K + k], B[k * N + j], acc);
      ASSERT_EQ(C[i * N + j], acc) << i << "," << j;  // bit-exact, not approximately
    }
  }
}

// Every way of running the GEMM this CPU has (rows, AVX2 and AVX-512 tiles):
// whole and partial register tiles (rows 6, columns 16 or 32), cache chunks of
// k, a K past one block, accumulating and not, with leading dimensions > width.
class GemmTilesTest : public ::testing::TestWithParam<cpu::GemmTiles> {};
TEST_P(GemmTilesTest, TilesAndChunksKeepEveryElementsChain) {
  if (!cpu::CanRun(GetParam())) GTEST_SKIP() << "this CPU lacks the instructions";
  for (const bool accumulate : {false, true}) {
    const int M = 14, N = 71, K = formulas::kGemmKBlock + 301, lda = K + 3, ldb = N + 2,
              ldc = N + 1;
    std::vector<float> A(M * lda), B(K * ldb), C(M * ldc), C0;
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : A) v = dist(gen);
    for (float& v : B) v = dist(gen);
    for (float& v : C) v = dist(gen);
    C0 = C;
    cpu::GemmWith(GetParam(), M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc, accumulate);
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        ASSERT_EQ(C[i * ldc + j], formulas::GemmOutput(K, &A[i * lda], 1, &B[j], ldb,
                                                       accumulate ? C0[i * ldc + j] : 0.0f))
            << i << " " << j;
      }
      ASSERT_EQ(C[i * ldc + N], C0[i * ldc + N]);  // past the row: untouched
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gemm, GemmTilesTest,
                         ::testing::Values(cpu::GemmTiles::kRows, cpu::GemmTiles::kAvx2,
                                           cpu::GemmTiles::kAvx512));

TEST(Transpose, EveryShapeAroundItsBlocks) {
  for (const auto& [rows, cols] : {std::pair{1, 1}, {3, 40}, {16, 16}, {17, 33}, {784, 16}}) {
    const auto src = Random(rows * cols, 3);
    std::vector<float> dst(src.size(), -1.0f);
    cpu::Transpose(rows, cols, src.data(), dst.data());
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c)
        ASSERT_EQ(dst[c * rows + r], src[r * cols + c]) << r << "," << c;
    }
  }
}

TEST(Gemm, LongKSumsChainsOverKBlocksInBlockOrder) {
  // Two full k blocks and a partial one, accumulating into C.
  const int M = 3, N = 5, K = 2 * formulas::kGemmKBlock + 37;
  auto A = Random(M * K, 5), B = Random(K * N, 6), C = Random(M * N, 7);
  const std::vector<float> C0 = C;
  cpu::Gemm(M, N, K, A.data(), K, B.data(), N, C.data(), N, true);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int k0 = 0; k0 < K; k0 += formulas::kGemmKBlock) {
        float chain = k0 == 0 ? C0[i * N + j] : 0.0f;
        for (int k = k0; k < std::min(K, k0 + formulas::kGemmKBlock); ++k)
          chain = std::fma(A[i * K + k], B[k * N + j], chain);
        sum = k0 == 0 ? chain : sum + chain;
      }
      ASSERT_EQ(C[i * N + j], sum) << i << "," << j;
      ASSERT_EQ(C[i * N + j], formulas::GemmOutput(K, &A[i * K], 1, &B[j], N, C0[i * N + j]));
    }
  }
}

TEST(ChannelSum, SumsEachSampleThenTheSamplesInOrder) {
  const int B = 5, C = 3, P = 37;
  auto dy = Random(B * C * P, 8);
  std::vector<float> got(C);
  cpu::ChannelSum(B, C, P, dy.data(), got.data());
  for (int c = 0; c < C; ++c) {
    float sum = 0.0f;
    for (int b = 0; b < B; ++b) {
      float part = 0.0f;
      for (int p = 0; p < P; ++p) part += dy[(b * C + c) * P + p];
      sum += part;
    }
    ASSERT_EQ(got[c], sum) << c;
  }
}

// Same-size kernels (the flat-copy routes: 3x3 and 5x5 padded, 1x3, an odd
// pad split, a kernel wider than the image) and strided or dilated ones.
const std::vector<cpu::ConvGeometry>& ConvShapes() {
  static const std::vector<cpu::ConvGeometry> shapes = {
      {2, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 5, 7}, {1, 4, 4, 5, 5, 1, 1, 2, 2, 1, 1, 4, 4},
      {3, 6, 3, 1, 3, 1, 1, 0, 1, 1, 1, 6, 3}, {2, 4, 6, 2, 2, 1, 1, 1, 0, 1, 1, 4, 6},
      {1, 3, 3, 5, 5, 1, 1, 2, 2, 1, 1, 3, 3}, {2, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, 3, 3},
      {1, 7, 7, 3, 3, 1, 1, 2, 2, 2, 2, 7, 7}};
  return shapes;
}

// Every entry as the header defines it.
TEST(Im2ColImage, EveryEntryIsTheImageOrZero) {
  for (const cpu::ConvGeometry& g : ConvShapes()) {
    const int rows = g.C * g.KH * g.KW, p = g.OH * g.OW, ld = p + 3;
    const auto x = Random(g.C * g.H * g.W, 9);
    std::vector<float> cols(static_cast<size_t>(rows) * ld, -7.0f);
    cpu::Im2ColImage(g, x.data(), cols.data(), ld);
    for (int c = 0; c < g.C; ++c) {
      for (int ky = 0; ky < g.KH; ++ky) {
        for (int kx = 0; kx < g.KW; ++kx) {
          const int r = (c * g.KH + ky) * g.KW + kx;
          for (int oy = 0; oy < g.OH; ++oy) {
            for (int ox = 0; ox < g.OW; ++ox) {
              const int iy = oy * g.SH - g.PT + ky * g.DH, ix = ox * g.SW - g.PL + kx * g.DW;
              const bool inside = iy >= 0 && iy < g.H && ix >= 0 && ix < g.W;
              ASSERT_EQ(cols[r * ld + oy * g.OW + ox], inside ? x[(c * g.H + iy) * g.W + ix] : 0.0f)
                  << "C" << g.C << " K" << g.KH << "x" << g.KW << " at " << r << "," << oy << ","
                  << ox;
            }
          }
          for (int e = p; e < ld; ++e) ASSERT_EQ(cols[r * ld + e], -7.0f) << "past the row";
        }
      }
    }
  }
}

// Col2ImImage as the header defines it: each image element the sum, from 0 in
// (ky, kx) order, of the entries that read it.
TEST(Im2ColImage, Col2ImSumsEachElementsReadersInTapOrder) {
  for (const cpu::ConvGeometry& g : ConvShapes()) {
    const int rows = g.C * g.KH * g.KW, p = g.OH * g.OW, ld = p + 3;
    const auto cols = Random(static_cast<size_t>(rows) * ld, 10);
    std::vector<float> dx(static_cast<size_t>(g.C) * g.H * g.W, -7.0f);
    cpu::Col2ImImage(g, cols.data(), ld, dx.data());
    for (int c = 0; c < g.C; ++c) {
      for (int iy = 0; iy < g.H; ++iy) {
        for (int ix = 0; ix < g.W; ++ix) {
          float sum = 0.0f;
          for (int ky = 0; ky < g.KH; ++ky) {
            for (int kx = 0; kx < g.KW; ++kx) {
              for (int oy = 0; oy < g.OH; ++oy) {
                for (int ox = 0; ox < g.OW; ++ox) {
                  if (oy * g.SH - g.PT + ky * g.DH != iy || ox * g.SW - g.PL + kx * g.DW != ix)
                    continue;
                  sum += cols[((c * g.KH + ky) * g.KW + kx) * ld + oy * g.OW + ox];
                }
              }
            }
          }
          ASSERT_EQ(dx[(c * g.H + iy) * g.W + ix], sum)
              << "K" << g.KH << "x" << g.KW << " at " << c << "," << iy << "," << ix;
        }
      }
    }
  }
}

TEST(Im2ColImage, Col2ImImageIsItsAdjoint) {
  // <im2col(x), c> == <x, col2im(c)> for random x, c; strided and padded.
  const cpu::ConvGeometry g = {3, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, 3, 3};
  const int rows = g.C * g.KH * g.KW, cols = g.OH * g.OW;
  auto x = Random(g.C * g.H * g.W, 3), c = Random(rows * cols, 4);
  std::vector<float> xc(rows * cols), cx(x.size());
  cpu::Im2ColImage(g, x.data(), xc.data(), cols);
  cpu::Col2ImImage(g, c.data(), cols, cx.data());
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < xc.size(); ++i) lhs += double(xc[i]) * c[i];
  for (size_t i = 0; i < x.size(); ++i) rhs += double(x[i]) * cx[i];
  EXPECT_NEAR(lhs, rhs, 1e-4);
}

// Finite-difference check of an analytic gradient: f is a scalar of the input.
template <typename F>
void CheckGradient(std::vector<float> x, const std::vector<float>& analytic, F f, double tol) {
  for (size_t i = 0; i < x.size(); i += 3) {
    const float h = 1e-2f, keep = x[i];
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    const double down = f(x);
    x[i] = keep;
    EXPECT_NEAR((up - down) / (2 * h), analytic[i], tol) << "element " << i;
  }
}

TEST(BatchNorm, BackwardMatchesFiniteDifferences) {
  const int B = 3, C = 2, P = 4;
  auto x = Random(B * C * P, 5), w = Random(B * C * P, 6);
  std::vector<float> gamma = {1.5f, 0.7f}, beta = {0.1f, -0.2f};
  auto loss = [&](const std::vector<float>& in) {
    std::vector<float> rm(C, 0), rv(C, 1), y(in.size()), m(C), s(C);
    cpu::BatchNormTrain(B, C, P, in.data(), gamma.data(), beta.data(), 1e-5f, 0.1f, rm.data(),
                        rv.data(), y.data(), m.data(), s.data());
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += double(y[i]) * w[i];
    return l;
  };
  std::vector<float> rm(C, 0), rv(C, 1), y(x.size()), m(C), s(C), dx(x.size()), dg(C), db(C);
  cpu::BatchNormTrain(B, C, P, x.data(), gamma.data(), beta.data(), 1e-5f, 0.1f, rm.data(),
                      rv.data(), y.data(), m.data(), s.data());
  cpu::BatchNormBackward(B, C, P, x.data(), w.data(), gamma.data(), m.data(), s.data(), dx.data(),
                         dg.data(), db.data());
  CheckGradient(x, dx, loss, 2e-2);
  EXPECT_NEAR(rm[0], 0.1 * m[0], 1e-7);  // running mean moved by the momentum
}

TEST(SoftmaxCrossEntropy, LossAndGradient) {
  const int R = 4, K = 5;
  auto z = Random(R * K, 7);
  std::vector<int32_t> labels = {0, 3, 4, 1};
  std::vector<float> dz(z.size()), scratch(z.size());
  const float loss = cpu::SoftmaxCrossEntropy(R, K, z.data(), labels.data(), dz.data());
  double want = 0;
  for (int r = 0; r < R; ++r) {
    double s = 0;
    for (int k = 0; k < K; ++k) s += std::exp(double(z[r * K + k]));
    want += std::log(s) - z[r * K + labels[r]];
  }
  EXPECT_NEAR(loss, want / R, 1e-5);
  CheckGradient(
      z, dz,
      [&](const std::vector<float>& in) {
        return double(cpu::SoftmaxCrossEntropy(R, K, in.data(), labels.data(), scratch.data()));
      },
      2e-3);
}

TEST(Dropout, MaskDependsOnlyOnKeyAndCounter) {
  std::vector<float> x(1000, 1.0f), y1(1000), y2(1000);
  std::vector<uint8_t> m1(1000), m2(1000);
  cpu::Dropout(x.size(), 0.25f, 1, 2, 40, x.data(), nullptr, y1.data(), m1.data());
  cpu::Dropout(x.size(), 0.25f, 1, 2, 40, x.data(), nullptr, y2.data(), m2.data());
  EXPECT_EQ(y1, y2);
  int dropped = 0;
  for (float v : y1) dropped += v == 0.0f;
  EXPECT_GT(dropped, 180);
  EXPECT_LT(dropped, 320);
  cpu::Dropout(x.size(), 0.25f, 1, 2, 41, x.data(), nullptr, y2.data(), m2.data());
  EXPECT_NE(y1, y2);
}

// The reverse pass scales each gradient as the forward pass scaled its
// element: by 1/(1-p) where kept, by 0 (a signed zero, NaN for inf and NaN)
// where dropped, exactly as multiplying by the scale.
TEST(Dropout, GradientIsScaledAsTheElementWas) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> dy = {1.5f, -2.0f, inf, -0.0f, std::nanf(""), 3.0f};
  const std::vector<uint8_t> kept = {1, 0, 0, 1, 1, 0};
  std::vector<float> dx(dy.size());
  cpu::DropoutBackward(dy.size(), 0.25f, kept.data(), dy.data(), dx.data());
  const float scale = 1.0f / 0.75f;
  for (size_t i = 0; i < dy.size(); ++i) {
    const float want = dy[i] * (kept[i] ? scale : 0.0f);
    EXPECT_EQ(std::memcmp(&dx[i], &want, sizeof(float)), 0) << i;
  }
  EXPECT_TRUE(std::signbit(dx[1]));  // -2 * 0
  EXPECT_TRUE(std::isnan(dx[2]));    // inf * 0
}

}  // namespace
}  // namespace easyscale
