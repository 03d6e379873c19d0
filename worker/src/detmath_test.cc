#include "easyscale/worker/detmath.h"

#include <gtest/gtest.h>

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
