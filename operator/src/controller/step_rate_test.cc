// The measured step rate and the time left that status.estimatedRemainingSeconds shows.
#include "controller/step_rate.h"

#include <gtest/gtest.h>

namespace easyscale::op {
namespace {

using namespace std::chrono_literals;

const StepRate::Clock::time_point kT0{};

TEST(StepRate, UnknownUntilTwoObservationsWithProgressASecondApart) {
  StepRate rate;
  EXPECT_EQ(rate.StepsPerSecond(), std::nullopt);
  rate.Observe(10, kT0);
  EXPECT_EQ(rate.StepsPerSecond(), std::nullopt);
  rate.Observe(12, kT0 + 500ms);  // too short a span to say anything
  EXPECT_EQ(rate.StepsPerSecond(), std::nullopt);
  EXPECT_EQ(rate.RemainingSeconds(12, 100), std::nullopt);
  rate.Observe(30, kT0 + 4s);
  ASSERT_TRUE(rate.StepsPerSecond().has_value());
  EXPECT_DOUBLE_EQ(*rate.StepsPerSecond(), 5.0);
  // 70 steps left at 5 steps/s.
  EXPECT_EQ(rate.RemainingSeconds(30, 100), 14);
  // Rounded up: 71 steps are 14.2 s.
  EXPECT_EQ(rate.RemainingSeconds(29, 100), 15);
  EXPECT_EQ(rate.RemainingSeconds(100, 100), 0);
}

TEST(StepRate, FollowsTheRateOfTheLastWindow) {
  StepRate rate(10s);
  for (int i = 0; i <= 20; ++i) rate.Observe(i, kT0 + std::chrono::seconds(i));  // 1 step/s
  EXPECT_DOUBLE_EQ(*rate.StepsPerSecond(), 1.0);
  // Scaled out: 4 steps/s from now on; a window later only that shows.
  for (int i = 1; i <= 10; ++i) rate.Observe(20 + 4 * i, kT0 + std::chrono::seconds(20 + i));
  EXPECT_DOUBLE_EQ(*rate.StepsPerSecond(), 4.0);
}

TEST(StepRate, AStallHasNoRateAndAStartOverForgetsThePast) {
  StepRate rate(10s);
  rate.Observe(0, kT0);
  rate.Observe(50, kT0 + 5s);
  EXPECT_DOUBLE_EQ(*rate.StepsPerSecond(), 10.0);
  for (int i = 6; i <= 30; ++i) rate.Observe(50, kT0 + std::chrono::seconds(i));
  EXPECT_EQ(rate.StepsPerSecond(), std::nullopt) << "no step for a whole window";
  // The state was lost: training starts over at step 0.
  rate.Observe(0, kT0 + 31s);
  EXPECT_EQ(rate.StepsPerSecond(), std::nullopt);
  rate.Observe(20, kT0 + 33s);
  EXPECT_DOUBLE_EQ(*rate.StepsPerSecond(), 10.0);
  rate.Reset();
  EXPECT_EQ(rate.StepsPerSecond(), std::nullopt);
}

}  // namespace
}  // namespace easyscale::op
