#include "easyscale/worker/detmath.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "easyscale/worker/philox.h"

namespace easyscale {
namespace {

TEST(DetMath, ExpIsAccurate) {
  for (float x = -80.0f; x < 80.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    EXPECT_NEAR(detmath::Exp(x) / want, 1.0, 4e-7) << x;
  }
  EXPECT_EQ(detmath::Exp(0.0f), 1.0f);
  EXPECT_EQ(detmath::Exp(-200.0f), 0.0f);
  EXPECT_TRUE(std::isinf(detmath::Exp(100.0f)));
}

TEST(DetMath, LogIsAccurate) {
  for (float x = 1e-30f; x < 1e30f; x *= 1.37f) {
    const double want = std::log(static_cast<double>(x));
    EXPECT_NEAR(detmath::Log(x), want, 2e-6 * std::max(1.0, std::fabs(want))) << x;
  }
  EXPECT_EQ(detmath::Log(1.0f), 0.0f);
  EXPECT_TRUE(std::isinf(detmath::Log(0.0f)));
  EXPECT_TRUE(std::isnan(detmath::Log(-1.0f)));
}

TEST(DetMath, CosIsAccurate) {
  for (double x = -10.0; x < 10.0; x += 0.01) EXPECT_NEAR(detmath::Cos(x), std::cos(x), 1e-13) << x;
}

// |got - want| in units of the float ulp at want (want in double).
double UlpError(float got, double want) {
  const float w = static_cast<float>(want);
  const double ulp = static_cast<double>(std::nextafter(std::fabs(w), INFINITY)) - std::fabs(w);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// The largest ulp error of f against the double reference g on [lo, hi), in
// relative steps of 1e-5 (about 2.5 million points over these ranges).
template <typename F, typename G>
double MaxUlpError(F f, G g, float lo, float hi) {
  double worst = 0;
  for (float x = lo; x < hi; x += std::max(1e-6f, std::fabs(x) * 1e-5f)) {
    worst = std::max(worst, UlpError(f(x), g(static_cast<double>(x))));
  }
  return worst;
}

// Measured: Erf 2.4 ulp, Tanh 1.5 ulp, Sigmoid 2.2 ulp (subnormal results
// included); bounded at 4 ulp.
TEST(DetMath, ErfWithinFourUlp) {
  EXPECT_LE(MaxUlpError(
                detmath::Erf, [](double x) { return std::erf(x); }, -6.0f, 6.0f),
            4.0);
  EXPECT_EQ(detmath::Erf(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(detmath::Erf(-0.0f)));
  EXPECT_EQ(detmath::Erf(10.0f), 1.0f);
  EXPECT_EQ(detmath::Erf(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(detmath::Erf(NAN)));
}

TEST(DetMath, TanhWithinFourUlp) {
  EXPECT_LE(MaxUlpError(
                detmath::Tanh, [](double x) { return std::tanh(x); }, -12.0f, 12.0f),
            4.0);
  EXPECT_EQ(detmath::Tanh(100.0f), 1.0f);
  EXPECT_TRUE(std::signbit(detmath::Tanh(-0.0f)));
  EXPECT_EQ(detmath::Tanh(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(detmath::Tanh(NAN)));
}

TEST(DetMath, SigmoidWithinFourUlp) {
  auto want = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  EXPECT_LE(MaxUlpError(detmath::Sigmoid, want, -100.0f, 100.0f), 4.0);
  EXPECT_EQ(detmath::Sigmoid(0.0f), 0.5f);
  EXPECT_EQ(detmath::Sigmoid(INFINITY), 1.0f);
  EXPECT_EQ(detmath::Sigmoid(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(detmath::Sigmoid(NAN)));
}

// Pow's error grows with |y log x| (exp of a rounded y * log x): within
// (4 + 2 |y log x|) ulp; squares are exact.
TEST(DetMath, PowAccuracyAndSpecialCases) {
  for (float y : {-2.5f, -1.0f, -0.5f, 0.5f, 1.5f, 3.0f}) {
    for (float x = 0.01f; x < 100.0f; x *= 1.001f) {
      const double want = std::pow(static_cast<double>(x), static_cast<double>(y));
      const double bound = 4.0 + 2.0 * std::fabs(y * std::log(x));
      EXPECT_LE(UlpError(detmath::Pow(x, y), want), bound) << x << "^" << y;
    }
  }
  EXPECT_EQ(detmath::Pow(3.1f, 2.0f), 3.1f * 3.1f);
  EXPECT_EQ(detmath::Pow(-2.0f, 3.0f), -8.0f);
  EXPECT_EQ(detmath::Pow(-2.0f, 2.0f), 4.0f);
  EXPECT_TRUE(std::isnan(detmath::Pow(-2.0f, 0.5f)));
  EXPECT_EQ(detmath::Pow(NAN, 0.0f), 1.0f);
  EXPECT_EQ(detmath::Pow(1.0f, NAN), 1.0f);
  EXPECT_TRUE(std::signbit(detmath::Pow(-0.0f, 3.0f)));
  EXPECT_EQ(detmath::Pow(0.0f, -1.0f), INFINITY);
  EXPECT_EQ(detmath::Pow(-0.0f, -3.0f), -INFINITY);
  EXPECT_EQ(detmath::Pow(-INFINITY, 0.5f), INFINITY);
  EXPECT_EQ(detmath::Pow(-1.0f, INFINITY), 1.0f);
  EXPECT_EQ(detmath::Pow(0.5f, INFINITY), 0.0f);
}

TEST(Philox, KnownAnswerAndCounterBased) {
  // Random123's known-answer test for philox4x32-10 with zero key and counter.
  uint32_t out[4];
  Philox4x32({0, 0}, 0, 0, out);
  EXPECT_EQ(out[0], 0x6627e8d5u);
  EXPECT_EQ(out[1], 0xe169c58du);
  EXPECT_EQ(out[2], 0xbc57ac4cu);
  EXPECT_EQ(out[3], 0x9b00dbd8u);
  PhiloxStream a(DeriveKey(1, 2), 0);
  for (int i = 0; i < 9; ++i) a.NextU32();
  a.Sync();
  PhiloxStream b(DeriveKey(1, 2), a.counter());
  EXPECT_EQ(a.NextU32(), b.NextU32());
}

}  // namespace
}  // namespace easyscale
