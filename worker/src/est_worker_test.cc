#include "easyscale/worker/est_worker.h"

#include <gtest/gtest.h>

#include <cstring>

#include "easyscale/worker/fixed_point.h"
#include "easyscale/worker/threaded_job.h"
#include "testing/threaded_training.h"

namespace easyscale {
namespace {

TEST(FixedPoint, SumIsOrderIndependentAndSaturates) {
  const float values[] = {1e-3f, -2.5f, 3.14159f, 1e-9f, 7.0f};
  int64_t forward = 0, backward = 0, q;
  for (float v : values) forward += (ToFixedPoint(v, 8, &q), q);
  for (int i = 4; i >= 0; --i) backward += (ToFixedPoint(values[i], 8, &q), q);
  EXPECT_EQ(forward, backward);
  EXPECT_NEAR(FixedPointMean(forward, 5), (1e-3 - 2.5 + 3.14159 + 1e-9 + 7.0) / 5, 1e-6);
  EXPECT_FALSE(ToFixedPoint(std::nanf(""), 8, &q));
  EXPECT_FALSE(ToFixedPoint(INFINITY, 8, &q));
  ASSERT_TRUE(ToFixedPoint(1e30f, 8, &q));
  EXPECT_EQ(q, int64_t{1} << 51);
  ASSERT_TRUE(ToFixedPoint(1e30f, 4096, &q));
  EXPECT_EQ(q, (int64_t{1} << 62) / 4096);
  // Ties round to even, as llrint does: 2^-33 is half a unit.
  ASSERT_TRUE(ToFixedPoint(0x1p-33f, 8, &q));
  EXPECT_EQ(q, 0);
  ASSERT_TRUE(ToFixedPoint(0x3p-33f, 8, &q));
  EXPECT_EQ(q, 2);
  // The bulk path agrees with the scalar one, and flags NaN.
  const float g[] = {0.1f, -0.7f, 3e-11f, 1e20f};
  int64_t acc[4] = {0, 0, 0, 0};
  ASSERT_TRUE(AccumulateFixedPoint(g, 4, 8, acc));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(acc[i], (ToFixedPoint(g[i], 8, &q), q));
  float mean[4], scalar[4];
  DecodeFixedPointMean(acc, 4, 3, mean);
  for (int i = 0; i < 4; ++i) scalar[i] = FixedPointMean(acc[i], 3);
  EXPECT_EQ(0, std::memcmp(mean, scalar, sizeof mean));
  const int64_t big[2] = {int64_t{1} << 60, -3};  // takes the scalar path
  DecodeFixedPointMean(big, 2, 3, mean);
  EXPECT_EQ(mean[0], FixedPointMean(big[0], 3));
  EXPECT_EQ(mean[1], FixedPointMean(big[1], 3));
  const float nan[] = {1.0f, std::nanf("")};
  EXPECT_FALSE(AccumulateFixedPoint(nan, 2, 8, acc));
}

class EstWorkerTest : public testing::ThreadedTraining {
 protected:
  EstWorkerTest() : ThreadedTraining("es-worker-", 6) {}

  // The ESTs spread as `placement`, all on the CPU, each worker with `lanes`.
  std::string Train(const std::vector<std::vector<int>>& placement, const std::string& name,
                    int lanes = 0) {
    std::vector<ThreadedWorker> workers;
    for (const auto& ests : placement) workers.push_back({ests, "cpu", lanes});
    return ThreadedTraining::Train(workers, name);
  }
};

TEST_F(EstWorkerTest, DigestIndependentOfPlacement) {
  const std::string one = Train({{0, 1, 2, 3}}, "one");
  EXPECT_EQ(one.size(), 64u);
  EXPECT_EQ(Train({{0, 1}, {2, 3}}, "two"), one);
  EXPECT_EQ(Train({{0, 1, 2}, {3}}, "uneven"), one);
  args_.seed = 99;
  EXPECT_NE(Train({{0, 1, 2, 3}}, "seed"), one);
}

// Lanes give each EST of a lane a model copy and its own sums (the CPU runs
// them in order; a GPU side by side): no bit may change.
TEST_F(EstWorkerTest, DigestIndependentOfLanes) {
  const std::string one = Train({{0, 1, 2, 3}}, "one-lane", 1);
  EXPECT_EQ(one.size(), 64u);
  EXPECT_EQ(Train({{0, 1, 2, 3}}, "three-lanes", 3), one);  // lane 0 runs two ESTs
  EXPECT_EQ(Train({{0, 1}, {2, 3}}, "two-by-two", 2), one);
}

TEST_F(EstWorkerTest, NegativeLanesRejected) {
  auto comm = MakeSingleProcessCollective();
  WorkerConfig c{args_, 4, {0, 1, 2, 3}, root_ + "/neg", EstField::kNone};
  c.lanes = -1;
  auto w = EstWorker::Create(c, data_, *comm);
  EXPECT_TRUE(absl::IsInvalidArgument(w.status())) << w.status();
}

TEST_F(EstWorkerTest, RestoreRejectsAnotherJobsCheckpoint) {
  Train({{0, 1, 2, 3}}, "a");
  args_.learningRate = 0.5;
  auto comm = MakeSingleProcessCollective();
  WorkerConfig c{args_, 4, {0, 1, 2, 3}, root_ + "/a", EstField::kNone};
  auto w = EstWorker::Create(c, data_, *comm);
  ASSERT_TRUE(w.ok());
  auto restored = (*w)->Restore();
  EXPECT_TRUE(absl::IsFailedPrecondition(restored.status())) << restored.status();
}

}  // namespace
}  // namespace easyscale
