#include "easyscale/worker/est_worker.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "easyscale/common/checks.h"
#include "easyscale/worker/fixed_point.h"
#include "easyscale/worker/optimizer.h"
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

// The update from the step's fixed-point sums (the worker's) gives the bits
// of the update from their decoded means: two parameters end to end, sums of
// every magnitude, SGD and Adam over two steps.
TEST(OptimizerStep, FromSumsEqualsFromTheirDecodedMeans) {
  const std::vector<int64_t> sums = {
      4294967296LL * 3, -7, 123456789012LL, int64_t{1} << 60, -(int64_t{1} << 55) - 7, 0, 99,
      -4294967296LL};
  for (const char* name : {"sgd", "adam"}) {
    TrainingArgs args;
    args.optimizer = name;
    std::vector<Param> from_sums(2), from_means(2);
    for (int i = 0; i < 2; ++i) {
      const std::vector<int> shape = {i == 0 ? 5 : 3};
      for (std::vector<Param>* ps : {&from_sums, &from_means}) {
        Param& p = (*ps)[i];
        p.value = Tensor(shape);
        p.grad = Tensor(shape);
        for (size_t e = 0; e < p.value.size(); ++e) p.value.data[e] = 0.25f * (e + 1) - i;
      }
    }
    std::vector<Param*> sums_params = {&from_sums[0], &from_sums[1]};
    std::vector<Param*> means_params = {&from_means[0], &from_means[1]};
    auto a = MakeOptimizer(args, sums_params), b = MakeOptimizer(args, means_params);
    KernelBackend& k = CpuKernelBackend();
    for (int step = 0; step < 2; ++step) {
      a->Step(k, sums_params, 0.1f, sums.data(), 3);
      size_t at = 0;
      for (Param* p : means_params) {
        for (float& g : p->grad.data) g = FixedPointMean(sums[at++], 3);
      }
      b->Step(k, means_params, 0.1f);
    }
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(0, std::memcmp(from_sums[i].value.ptr(), from_means[i].value.ptr(),
                               from_sums[i].value.bytes()))
          << name << " parameter " << i;
    }
  }
}

class EstWorkerTest : public testing::ThreadedTraining {
 protected:
  EstWorkerTest() : ThreadedTraining(6) {}

  // The ESTs spread as `placement`, all on the CPU, each worker with `lanes`.
  std::string Train(const std::vector<std::vector<int>>& placement, int lanes = 0) {
    std::vector<ThreadedWorker> workers;
    for (const auto& ests : placement) workers.push_back({ests, "cpu", lanes});
    return ThreadedTraining::Train(workers);
  }

  WorkerConfig Config(std::vector<int> ests) { return WorkerConfig{args_, kEsts, std::move(ests)}; }
};

// A collective that sums like one process until told to fail.
class FailingCollective : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status AllreduceSum(std::span<int64_t>) override {
    return fail ? absl::UnavailableError("peer gone") : absl::OkStatus();
  }
  Status Barrier() override { return absl::OkStatus(); }
  bool fail = false;
};

TEST_F(EstWorkerTest, DigestIndependentOfPlacement) {
  const std::string one = Train({{0, 1, 2, 3}});
  EXPECT_EQ(one.size(), 64u);
  EXPECT_EQ(Train({{0, 1}, {2, 3}}), one);
  EXPECT_EQ(Train({{0, 1, 2}, {3}}), one);
  args_.seed = 99;
  EXPECT_NE(Train({{0, 1, 2, 3}}), one);
}

// Lanes give each lane a model copy; a lane's last pass leaves its gradients
// to be folded after the lanes join, its earlier ones fold into its own sums
// (the CPU runs them in order; a GPU side by side): no bit may change.
TEST_F(EstWorkerTest, DigestIndependentOfLanes) {
  const std::string one = Train({{0, 1, 2, 3}}, 1);
  EXPECT_EQ(one.size(), 64u);
  EXPECT_EQ(Train({{0, 1, 2, 3}}, 3), one);  // lane 0 runs two ESTs
  EXPECT_EQ(Train({{0, 1, 2, 3}}, 2), one);  // so does lane 1, a model copy
  EXPECT_EQ(Train({{0, 1, 2, 3}}, 4), one);  // one EST a lane
  EXPECT_EQ(Train({{0, 1}, {2, 3}}, 2), one);
}

// Scale events hand the whole state over in memory: any split of the run into
// segments with other placements gives the one-segment digest.
TEST_F(EstWorkerTest, DigestIndependentOfScaleEvents) {
  const std::string one = Train({{0, 1, 2, 3}});
  auto elastic = TrainInThreads(
      args_, data_, kEsts,
      {{0, {{{0, 1}}, {{2, 3}}}}, {2, {{{0}}, {{1, 2}}, {{3}}}}, {5, {{{0, 1, 2, 3}}}}});
  ASSERT_TRUE(elastic.ok()) << elastic.status();
  EXPECT_EQ(*elastic, one);
}

TEST_F(EstWorkerTest, NegativeLanesRejected) {
  auto comm = MakeSingleProcessCollective();
  WorkerConfig c = Config({0, 1, 2, 3});
  c.lanes = -1;
  auto w = EstWorker::Create(c, data_, *comm);
  EXPECT_TRUE(absl::IsInvalidArgument(w.status())) << w.status();
}

// Every worker ends each step holding every EST's context: the snapshots of
// two workers hosting different ESTs are equal, byte for byte.
TEST_F(EstWorkerTest, EveryWorkerHoldsTheWholeJobAfterAStep) {
  LocalRendezvous rendezvous;
  std::vector<TrainingSnapshot> snapshots(2);
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      results[r] = [&]() -> Status {
        ES_ASSIGN_OR_RETURN(auto comm, rendezvous.Connect(r, 2, {}));
        ES_ASSIGN_OR_RETURN(auto w, EstWorker::Create(Config(r == 0 ? std::vector<int>{0, 1, 2}
                                                                    : std::vector<int>{3}),
                                                      data_, *comm));
        w->Initialize();
        for (int i = 0; i < 3; ++i) ES_RETURN_IF_ERROR(w->Step(false).status());
        snapshots[r] = w->Snapshot();
        return absl::OkStatus();
      }();
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(results[0].ok()) << results[0];
  ASSERT_TRUE(results[1].ok()) << results[1];
  EXPECT_EQ(snapshots[0].step, 3);
  EXPECT_EQ(snapshots[0].ests.size(), 4u);
  EXPECT_EQ(snapshots[0], snapshots[1]);
  // And a worker that restores it continues exactly as the run that made it.
  auto comm = MakeSingleProcessCollective();
  auto w = EstWorker::Create(Config({0, 1, 2, 3}), data_, *comm);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Restore(snapshots[1], "peer").ok());
  EXPECT_EQ((*w)->Snapshot(), snapshots[0]);
}

// A step whose collective fails keeps nothing: the state is the last
// completed step's, and training goes on from there with the same bits.
TEST_F(EstWorkerTest, FailedCollectiveRollsBackToTheLastStep) {
  FailingCollective comm;
  auto w = EstWorker::Create(Config({0, 1, 2, 3}), data_, comm);
  ASSERT_TRUE(w.ok());
  (*w)->Initialize();
  ASSERT_TRUE((*w)->Step(false).ok());
  const TrainingSnapshot before = (*w)->Snapshot();
  comm.fail = true;
  auto failed = (*w)->Step(false);
  EXPECT_TRUE(absl::IsUnavailable(failed.status())) << failed.status();
  EXPECT_EQ((*w)->Snapshot(), before);
  comm.fail = false;
  for (int i = 1; i < args_.steps; ++i) ASSERT_TRUE((*w)->Step(false).ok());
  auto digest = EstWorker::Finalize(Config({0, 1, 2, 3}), data_, (*w)->Snapshot());
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(digest->digest, Train({{0, 1, 2, 3}}));
}

// Profiling (WorkerConfig::profile_ops) times each op type's forward and
// backward and changes no bit of the step.
TEST_F(EstWorkerTest, ProfiledStepsTimeEachOpAndChangeNothing) {
  auto comm = MakeSingleProcessCollective();
  WorkerConfig profiled = Config({0, 1, 2, 3});
  profiled.profile_ops = true;
  auto plain = EstWorker::Create(Config({0, 1, 2, 3}), data_, *comm);
  auto timed = EstWorker::Create(profiled, data_, *comm);
  ASSERT_TRUE(plain.ok() && timed.ok());
  for (auto* w : {&*plain, &*timed}) {
    (*w)->Initialize();
    for (int i = 0; i < 2; ++i) ASSERT_TRUE((*w)->Step(false).ok());
  }
  EXPECT_EQ((*timed)->Snapshot(), (*plain)->Snapshot());
  EXPECT_TRUE((*plain)->op_times().empty());
  const OpTimes& times = (*timed)->op_times();
  for (const char* op : {"Conv forward", "Conv backward", "Gemm forward", "Gemm backward"}) {
    ASSERT_EQ(times.count(op), 1u) << op;
    EXPECT_GT(times.at(op), 0.0) << op;
  }
  // By node: each node's name (the built-in models' "/<index>/<op>") instead.
  profiled.profile_by_node = true;
  auto by_node = EstWorker::Create(profiled, data_, *comm);
  ASSERT_TRUE(by_node.ok());
  (*by_node)->Initialize();
  ASSERT_TRUE((*by_node)->Step(false).ok());
  const OpTimes& node_times = (*by_node)->op_times();
  EXPECT_EQ(node_times.count("Conv forward"), 0u);
  for (const char* node : {"/0/Conv forward", "/0/Conv backward"}) {
    ASSERT_EQ(node_times.count(node), 1u) << node;
    EXPECT_GT(node_times.at(node), 0.0) << node;
  }
}

TEST_F(EstWorkerTest, RestoreRejectsAnotherJobsOrAPartialSnapshot) {
  auto comm = MakeSingleProcessCollective();
  auto a = EstWorker::Create(Config({0, 1, 2, 3}), data_, *comm);
  ASSERT_TRUE(a.ok());
  (*a)->Initialize();
  TrainingSnapshot snapshot = (*a)->Snapshot();
  args_.learningRate = 0.5;
  auto b = EstWorker::Create(Config({0, 1, 2, 3}), data_, *comm);
  ASSERT_TRUE(b.ok());
  Status other = (*b)->Restore(snapshot, "peer");
  EXPECT_TRUE(absl::IsFailedPrecondition(other)) << other;
  args_.learningRate = 0.05;
  auto c = EstWorker::Create(Config({0, 1, 2, 3}), data_, *comm);
  ASSERT_TRUE(c.ok());
  snapshot.ests.erase(2);
  Status partial = (*c)->Restore(snapshot, "peer");
  EXPECT_TRUE(absl::IsDataLoss(partial)) << partial;
  EXPECT_NE(partial.message().find("3 EST contexts"), std::string::npos) << partial;
}

TEST(Snapshot, RoundTripsAndRejectsDamage) {
  TrainingSnapshot s{7, "job", {{0, "ctx0"}, {1, "ctx1"}}};
  const std::string bytes = EncodeSnapshot(s);
  auto back = DecodeSnapshot(bytes, "peer");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  std::string damaged = bytes;
  damaged[bytes.size() / 2] ^= 1;
  EXPECT_TRUE(absl::IsDataLoss(DecodeSnapshot(damaged, "peer").status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeSnapshot(bytes.substr(0, 20), "peer").status()));
}

}  // namespace
}  // namespace easyscale
