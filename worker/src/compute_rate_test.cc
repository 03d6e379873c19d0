#include "compute_rate.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

TEST(ComputeRate, NothingUntilAStepAfterTheWarmUp) {
  ComputeRate rate(64);
  EXPECT_EQ(rate.SamplesPerSecond(), 0.0);
  rate.AddStep(5.0);  // the generation's first step: allocations, caches
  EXPECT_EQ(rate.SamplesPerSecond(), 0.0);
  rate.AddStep(0.5);
  EXPECT_DOUBLE_EQ(rate.SamplesPerSecond(), 128.0);
}

// The rate the operator acted on was one step's: a worker descheduled for one
// step looked 50 times slower than its peer and the scheduler dropped it.
TEST(ComputeRate, OneStretchedStepBarelyMovesIt) {
  ComputeRate rate(10);
  rate.AddStep(1.0);
  for (int i = 0; i < 99; ++i) rate.AddStep(0.01);
  const double steady = rate.SamplesPerSecond();
  EXPECT_NEAR(steady, 1000.0, 1e-9);
  rate.AddStep(0.5);  // 50 times its usual time
  EXPECT_GT(rate.SamplesPerSecond(), steady * 0.6);
}

}  // namespace
}  // namespace easyscale
