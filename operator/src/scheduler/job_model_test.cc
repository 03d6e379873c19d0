#include "job_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "easyscale/common/est_assignment.h"

namespace easyscale::op::internal {
namespace {

// The grouped step time must equal what AssignBySpeed achieves per worker.
TEST(StepTimeTest, MatchesAssignBySpeedOnRandomInputs) {
  std::mt19937 rng(7);
  const std::vector<double> kSpeeds = {4.0, 3.5, 2.5, 1.2, 0.6, 0.1, 1.0 / 3.0};
  for (int iter = 0; iter < 2000; ++iter) {
    const int types = 1 + rng() % 4;
    const int ests = 1 + rng() % 64;
    std::vector<int> counts(types);
    std::vector<double> speeds(types);
    std::vector<double> perWorker;
    for (int t = 0; t < types; ++t) {
      counts[t] = rng() % 5;
      speeds[t] = kSpeeds[rng() % kSpeeds.size()];
      for (int i = 0; i < counts[t]; ++i) perWorker.push_back(speeds[t]);
    }
    const double got = StepTime(ests, counts, speeds);
    if (perWorker.empty() || static_cast<int>(perWorker.size()) > ests) {
      EXPECT_EQ(got, kInfinity);
      continue;
    }
    StatusOr<EstAssignment> a = AssignBySpeed(ests, perWorker);
    ASSERT_TRUE(a.ok()) << a.status();
    double want = 0.0;
    for (size_t r = 0; r < perWorker.size(); ++r) {
      want = std::max(want, a->workers[r].size() / perWorker[r]);
    }
    EXPECT_NEAR(got, want, 1e-9 * want) << "iteration " << iter;
  }
}

TEST(StepTimeTest, SlowestWorkerBoundsTheStep) {
  // One EST on a t4 (0.6) takes longer than four on an h200 (4.0).
  EXPECT_DOUBLE_EQ(StepTime(4, {1, 0}, {4.0, 0.6}), 1.0);
  EXPECT_DOUBLE_EQ(StepTime(4, {1, 1}, {4.0, 0.6}), 1.0 / 0.6);
  EXPECT_DOUBLE_EQ(Throughput(4, {0, 0}, {4.0, 0.6}), 0.0);
}

}  // namespace
}  // namespace easyscale::op::internal
