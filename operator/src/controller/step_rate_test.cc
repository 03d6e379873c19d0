// The measured step rate and the time left that status.estimatedRemainingSeconds shows.
#include "controller/step_rate.h"

#include <gtest/gtest.h>

namespace easyscale::op {
namespace {

using namespace std::chrono_literals;

const StepRate::Clock::time_point kT0{};

TEST(StepRate, UnknownUntilTwoStepsReachedASecondApart) {
  StepRate rate;
  EXPECT_EQ(rate.StepsPerSecond(kT0), std::nullopt);
  rate.Observe(10, kT0);
  EXPECT_EQ(rate.StepsPerSecond(kT0), std::nullopt);
  rate.Observe(12, kT0 + 500ms);  // too short a span to say anything
  EXPECT_EQ(rate.StepsPerSecond(kT0 + 500ms), std::nullopt);
  EXPECT_EQ(rate.RemainingSeconds(12, 100, kT0 + 500ms), std::nullopt);
  rate.Observe(30, kT0 + 4s);
  ASSERT_TRUE(rate.StepsPerSecond(kT0 + 4s).has_value());
  EXPECT_DOUBLE_EQ(*rate.StepsPerSecond(kT0 + 4s), 5.0);
  // 70 steps left at 5 steps/s.
  EXPECT_EQ(rate.RemainingSeconds(30, 100, kT0 + 4s), 14);
  // Rounded up: 71 steps are 14.2 s.
  EXPECT_EQ(rate.RemainingSeconds(29, 100, kT0 + 4s), 15);
  EXPECT_EQ(rate.RemainingSeconds(100, 100, kT0 + 4s), 0);
}

TEST(StepRate, FollowsTheRateOfTheLastWindow) {
  StepRate rate(10s);
  for (int i = 0; i <= 20; ++i) rate.Observe(i, kT0 + std::chrono::seconds(i));  // 1 step/s
  EXPECT_DOUBLE_EQ(*rate.StepsPerSecond(kT0 + 20s), 1.0);
  // Scaled out: 4 steps/s from now on; a window later only that shows.
  for (int i = 1; i <= 10; ++i) rate.Observe(20 + 4 * i, kT0 + std::chrono::seconds(20 + i));
  EXPECT_DOUBLE_EQ(*rate.StepsPerSecond(kT0 + 30s), 4.0);
}

// Between steps the estimate holds still (observations at the same step
// change nothing); a whole window without a step leaves no estimate.
TEST(StepRate, HoldsBetweenStepsForgetsAStallAndAStartOver) {
  StepRate rate(10s);
  rate.Observe(0, kT0);
  rate.Observe(50, kT0 + 5s);
  for (int i = 6; i <= 14; ++i) rate.Observe(50, kT0 + std::chrono::seconds(i));
  EXPECT_DOUBLE_EQ(*rate.StepsPerSecond(kT0 + 14s), 10.0);
  EXPECT_EQ(rate.RemainingSeconds(50, 120, kT0 + 14s), 7);
  EXPECT_EQ(rate.StepsPerSecond(kT0 + 16s), std::nullopt) << "no step for a whole window";
  // The state was lost: training starts over at step 0.
  rate.Observe(0, kT0 + 31s);
  EXPECT_EQ(rate.StepsPerSecond(kT0 + 31s), std::nullopt);
  rate.Observe(20, kT0 + 33s);
  EXPECT_DOUBLE_EQ(*rate.StepsPerSecond(kT0 + 33s), 10.0);
}

}  // namespace
}  // namespace easyscale::op
