#include "simulator.h"

#include <gtest/gtest.h>

#include "report.h"

namespace easyscale::sim {
namespace {

// One node of 4 a100s; one 4-worker job of 4 ESTs at 10 samples/s per
// worker, 40,000 samples (1,000 s at full size); at t=200 inference wants 2.
Trace Tiny() {
  Trace t;
  t.horizon = 4000;
  t.nodes = {{"n1", "a100", 4}};
  t.inference = {{200, "n1", 2}};
  TraceJob j;
  j.name = "j";
  j.ests = 4;
  j.minWorkers = 1;
  j.maxWorkers = 4;
  j.workSamples = 40000;
  j.speed = {{"a100", 10.0}};
  t.jobs = {j};
  return t;
}

SimOptions NoPause() {
  SimOptions o;
  o.rescalePause = 0;
  o.preemptLatency = 1;
  return o;
}

TEST(SimulatorTest, EasyScalePreemptsAtOnceAndShrinks) {
  const PolicyResult r = Simulate(Tiny(), Policy::kEasyScale, NoPause());
  EXPECT_EQ(r.preemptedWorkers, 2);
  // Inference waited one mini-batch on each of the two GPUs.
  EXPECT_DOUBLE_EQ(r.inferenceWaitGpuSeconds, 2.0);
  ASSERT_EQ(r.jobsCompleted, 1);
  // 200 s at 40/s, then 32,000 samples at 20/s: done at 1,800 s.
  EXPECT_NEAR(r.completionSeconds.mean, 1800.0, 1e-6);
  EXPECT_NEAR(r.trainedSamples, 40000.0, 1e-3);
}

TEST(SimulatorTest, StaticGangNeverPreemptsSoInferenceWaits) {
  const PolicyResult r = Simulate(Tiny(), Policy::kStatic, NoPause());
  EXPECT_EQ(r.preemptedWorkers, 0);
  ASSERT_EQ(r.jobsCompleted, 1);
  EXPECT_NEAR(r.completionSeconds.mean, 1000.0, 1e-6);
  // Two GPUs wanted from 200 s until the job ends at 1,000 s.
  EXPECT_NEAR(r.inferenceWaitGpuSeconds, 1600.0, 1e-6);
  // Busy: 4 GPUs until 1,000 s, then inference's 2 until 4,000 s.
  EXPECT_NEAR(r.utilisation, (4 * 1000.0 + 2 * 3000.0) / (4 * 4000.0), 1e-9);
}

TEST(SimulatorTest, StaticJobWaitsForItsFullSize) {
  Trace t = Tiny();
  t.inference = {{0, "n1", 1}, {500, "n1", 0}};
  const PolicyResult r = Simulate(t, Policy::kStatic, NoPause());
  ASSERT_EQ(r.jobsStarted, 1);
  EXPECT_NEAR(r.queueingSeconds.mean, 500.0, 1e-6);
  const PolicyResult e = Simulate(t, Policy::kEasyScale, NoPause());
  EXPECT_NEAR(e.queueingSeconds.mean, 0.0, 1e-6);  // elastic: starts on 3
}

TEST(SimulatorTest, RescalePauseDelaysProgress) {
  SimOptions o = NoPause();
  o.rescalePause = 30;
  const PolicyResult r = Simulate(Tiny(), Policy::kStatic, o);
  EXPECT_NEAR(r.completionSeconds.mean, 1030.0, 1e-6);
}

// Regression (issue 16): the plot drew a time tick a day however long the
// horizon, so a huge horizon never finished. Ticks are now at most a dozen.
TEST(SimulatorTest, PlotHasBoundedTicksForAnyHorizon) {
  PolicyResult r;
  r.horizon = 1e9;  // 31 years
  r.utilisationSeries.assign(480, 0.5);
  r.inferenceSeries = r.utilisationSeries;
  const std::string svg = RenderSvg({r}, "long");
  size_t ticks = 0;
  for (size_t at = svg.find("d</text>"); at != std::string::npos; at = svg.find("d</text>", at + 1))
    ++ticks;
  EXPECT_GE(ticks, 2u);
  EXPECT_LE(ticks, 13u);
}

TEST(SimulatorTest, SummaryUsesNearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  const Summary s = Summarise(v);
  EXPECT_EQ(s.count, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, 50);
  EXPECT_DOUBLE_EQ(s.p95, 95);
}

}  // namespace
}  // namespace easyscale::sim
