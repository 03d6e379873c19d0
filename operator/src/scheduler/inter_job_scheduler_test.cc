#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "easyscale/operator/scheduler.h"

namespace easyscale::op {
namespace {

NodeGpus Node(std::string name, std::string type, int total, int held = 0, int pending = 0) {
  return NodeGpus{std::move(name), std::move(type), total, held, pending};
}

JobDemand Job(std::string key, int ests, int minW, int maxW, int priority = 0, int64_t order = 0) {
  JobDemand j;
  j.key = std::move(key);
  j.ests = ests;
  j.minWorkers = minW;
  j.maxWorkers = maxW;
  j.priority = priority;
  j.submitOrder = order;
  return j;
}

int Workers(const JobAllocation& a, const std::string& type = "") {
  int n = 0;
  for (const Placement& p : a.placements) {
    if (type.empty() || p.gpuType == type) n += p.workers;
  }
  return n;
}

ScheduleResult Decide(const ClusterState& c, SchedulerOptions o = {}) {
  return InterJobScheduler(std::move(o)).Schedule(c);
}

TEST(InterJobSchedulerTest, RespectsMaxAndLeavesJobsBelowMinWaiting) {
  ClusterState c;
  c.nodes = {Node("n1", "a100", 8), Node("n2", "a100", 8, /*held=*/3)};
  c.jobs = {Job("small", 8, 1, 4, 0, 1), Job("huge", 32, 20, 32, 0, 2)};
  const ScheduleResult r = Decide(c);
  ASSERT_EQ(r.allocations.size(), 2u);
  EXPECT_EQ(r.allocations[0].job, "small");
  EXPECT_EQ(Workers(r.allocations[0]), 4);
  // 13 GPUs are idle: not enough for 20 workers, so the job gets nothing.
  EXPECT_EQ(Workers(r.allocations[1]), 0);
  EXPECT_EQ(r.allocations[1].throughput, 0.0);
  EXPECT_TRUE(r.preemptions.empty());
}

TEST(InterJobSchedulerTest, HigherPriorityMinimumComesFirst) {
  ClusterState c;
  c.nodes = {Node("n1", "a100", 8)};
  // The low-priority job was submitted first, but the urgent one is served first.
  c.jobs = {Job("low", 8, 4, 8, 0, 1), Job("urgent", 8, 6, 8, 5, 2)};
  const ScheduleResult r = Decide(c);
  EXPECT_EQ(Workers(r.allocations[1]), 8);
  EXPECT_EQ(Workers(r.allocations[0]), 0);
}

TEST(InterJobSchedulerTest, WaitingHighPriorityJobReclaimsFromLowerPriority) {
  ClusterState c;
  c.nodes = {Node("n1", "a100", 8)};
  JobDemand low = Job("low", 8, 2, 8, 0, 1);
  low.current = {{"n1", "a100", 8}};
  c.jobs = {low, Job("urgent", 4, 4, 4, 1, 2)};
  const ScheduleResult r = Decide(c);
  EXPECT_EQ(Workers(r.allocations[1]), 4);
  EXPECT_EQ(Workers(r.allocations[0]), 4);  // shrunk, still above its minimum

  SchedulerOptions noReclaim;
  noReclaim.reclaimForPriority = false;
  const ScheduleResult kept = Decide(c, noReclaim);
  EXPECT_EQ(Workers(kept.allocations[0]), 8);
  EXPECT_EQ(Workers(kept.allocations[1]), 0);
}

TEST(InterJobSchedulerTest, UsesOnlyAllowedGpuTypes) {
  ClusterState c;
  c.nodes = {Node("n1", "a100", 4), Node("n2", "t4", 2)};
  JobDemand j = Job("j", 8, 1, 8);
  j.gpuTypes = {"t4"};
  c.jobs = {j};
  const ScheduleResult r = Decide(c);
  EXPECT_EQ(Workers(r.allocations[0], "t4"), 2);
  EXPECT_EQ(Workers(r.allocations[0], "a100"), 0);
}

TEST(InterJobSchedulerTest, GivesEachGpuTypeToTheJobThatGainsMost) {
  ClusterState c;
  c.nodes = {Node("n1", "a100", 4), Node("n2", "t4", 4)};
  JobDemand x = Job("x", 4, 1, 4, 0, 1);
  x.speed = {{"a100", 10.0}, {"t4", 1.0}};
  JobDemand y = Job("y", 4, 1, 4, 0, 2);
  y.speed = {{"a100", 2.0}, {"t4", 1.9}};
  c.jobs = {x, y};
  const ScheduleResult r = Decide(c);
  EXPECT_EQ(Workers(r.allocations[0], "a100"), 4);
  EXPECT_EQ(Workers(r.allocations[1], "t4"), 4);
  EXPECT_NEAR(r.totalThroughput, 40.0 + 7.6, 1e-9);
}

TEST(InterJobSchedulerTest, MixesTypesOnlyWhenTheSlowestDoesNotHoldTheJobBack) {
  ClusterState c;
  c.nodes = {Node("n1", "h200", 2), Node("n2", "t4", 6)};
  // 8 ESTs: one EST on a t4 (1/0.6 s) is slower than 4 on an h200 (1 s).
  c.jobs = {Job("few", 8, 1, 8)};
  ScheduleResult r = Decide(c);
  EXPECT_EQ(Workers(r.allocations[0], "h200"), 2);
  EXPECT_EQ(Workers(r.allocations[0], "t4"), 0);
  EXPECT_DOUBLE_EQ(r.allocations[0].throughput, 8.0);
  // 64 ESTs: the t4s take 3 each and shorten the step from 8 s to 5.75 s.
  c.jobs = {Job("many", 64, 1, 8)};
  r = Decide(c);
  EXPECT_EQ(Workers(r.allocations[0], "h200"), 2);
  EXPECT_EQ(Workers(r.allocations[0], "t4"), 6);
  EXPECT_NEAR(r.allocations[0].throughput, 64 / 5.75, 1e-9);
}

TEST(InterJobSchedulerTest, HomogeneousPolicyKeepsAJobOnOneType) {
  ClusterState c;
  c.nodes = {Node("n1", "h200", 2), Node("n2", "t4", 6)};
  c.jobs = {Job("many", 64, 1, 8)};
  SchedulerOptions o;
  o.homogeneous = true;
  const ScheduleResult r = Decide(c, o);
  EXPECT_EQ(Workers(r.allocations[0], "h200"), 2);
  EXPECT_EQ(Workers(r.allocations[0], "t4"), 0);
}

TEST(InterJobSchedulerTest, NoChurnForGainsBelowMinGain) {
  ClusterState c;
  c.nodes = {Node("n1", "h200", 1), Node("n2", "t4", 1)};
  JobDemand j = Job("j", 40, 1, 2);
  j.current = {{"n1", "h200", 1}};
  c.jobs = {j};
  // Adding the t4 shortens the step from 10 s to 8.75 s: +14%.
  SchedulerOptions strict;
  strict.minGain = 0.2;
  EXPECT_EQ(Decide(c, strict).allocations[0].placements, j.current);
  SchedulerOptions loose;
  loose.minGain = 0.1;
  EXPECT_EQ(Workers(Decide(c, loose).allocations[0], "t4"), 1);
}

TEST(InterJobSchedulerTest, KeepsCurrentPlacementsWhereTheyAre) {
  ClusterState c;
  c.nodes = {Node("a", "a100", 8), Node("b", "a100", 8)};
  JobDemand j = Job("j", 6, 1, 6);
  j.current = {{"b", "a100", 4}};
  c.jobs = {j};
  const ScheduleResult r = Decide(c);
  // Grows on the node it already runs on rather than the emptier-named one.
  ASSERT_EQ(r.allocations[0].placements.size(), 1u);
  EXPECT_EQ(r.allocations[0].placements[0], (Placement{"b", "a100", 6}));
}

// Node n1 has 4 GPUs, both jobs run 2 there; inference claims one.
ClusterState VictimCluster(int minOfB) {
  ClusterState c;
  c.nodes = {Node("n1", "a100", 4, 0, /*pending=*/1), Node("n2", "a100", 2)};
  JobDemand a = Job("a", 3, 1, 3, 0, 1);  // 3 workers: 3 -> 1.5 samples/s without one
  a.speed = {{"a100", 1.0}};
  a.current = {{"n1", "a100", 2}, {"n2", "a100", 1}};
  JobDemand b = Job("b", 5, minOfB, 3, 0, 2);  // 2.5 -> 1.67 without one
  b.speed = {{"a100", 1.0}};
  b.current = {{"n1", "a100", 2}, {"n2", "a100", 1}};
  c.jobs = {a, b};
  return c;
}

TEST(InterJobSchedulerTest, PreemptsTheWorkerWhoseJobLosesLeast) {
  const ScheduleResult r = Decide(VictimCluster(1));
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].job, "b");
  EXPECT_EQ(r.preemptions[0].node, "n1");
  EXPECT_EQ(r.preemptions[0].workers, 1);
  EXPECT_EQ(Workers(r.allocations[0]), 3);
  EXPECT_EQ(Workers(r.allocations[1]), 2);
}

TEST(InterJobSchedulerTest, VictimBelowMinimumCountsItsWholeThroughput) {
  // b would drop below its minimum of 3: losing all 2.5 samples/s costs more than a's 1.5.
  const ScheduleResult r = Decide(VictimCluster(3));
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].job, "a");
  EXPECT_EQ(Workers(r.allocations[0]), 2);
  EXPECT_EQ(Workers(r.allocations[1]), 3);
}

TEST(InterJobSchedulerTest, WithoutPreemptionInferenceWaitsAndTrainingStays) {
  SchedulerOptions o;
  o.preemptForInference = false;
  const ScheduleResult r = Decide(VictimCluster(1), o);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(Workers(r.allocations[0]), 3);
  EXPECT_EQ(Workers(r.allocations[1]), 3);
}

TEST(InterJobSchedulerTest, ShedsWorkersThatAddNoThroughput) {
  ClusterState c;
  c.nodes = {Node("n1", "a100", 32, 0, /*pending=*/1)};
  JobDemand big = Job("big", 32, 1, 32, 0, 1);
  big.current = {{"n1", "a100", 32}};
  c.jobs = {big, Job("small", 8, 1, 8, 0, 2)};
  const ScheduleResult r = Decide(c);
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].job, "big");
  // 31 workers for 32 ESTs step like 16 (two ESTs on someone): 15 go to others.
  EXPECT_EQ(Workers(r.allocations[0]), 16);
  EXPECT_EQ(Workers(r.allocations[1]), 8);
}

ClusterState RandomCluster(uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> types = {"h100", "a100", "v100", "t4"};
  ClusterState c;
  for (int n = 0; n < 40; ++n) {
    const int total = 8;
    const int held = rng() % 5;
    c.nodes.push_back(Node("node-" + std::to_string(n), types[n % 4], total, held, rng() % 3));
  }
  for (int j = 0; j < 60; ++j) {
    JobDemand d = Job("ns/job-" + std::to_string(j), 1 + rng() % 32, 1, 1, rng() % 3, j % 7);
    d.maxWorkers = 1 + rng() % d.ests;
    d.minWorkers = 1 + rng() % d.maxWorkers;
    if (rng() % 3 == 0) d.gpuTypes = {types[rng() % 4], types[rng() % 4]};
    if (rng() % 2 == 0) d.speed["a100"] = 1.0 + (rng() % 100) / 10.0;
    if (rng() % 2 == 0) {
      const int n = rng() % 40;
      d.current = {{"node-" + std::to_string(n), types[n % 4], 1 + static_cast<int>(rng() % 3)}};
    }
    c.jobs.push_back(d);
  }
  return c;
}

TEST(InterJobSchedulerTest, DeterministicAndIndependentOfInputOrder) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    const ClusterState c = RandomCluster(seed);
    const ScheduleResult a = Decide(c);
    const ScheduleResult b = Decide(c);
    ClusterState shuffled = c;
    std::mt19937 rng(seed * 31);
    std::shuffle(shuffled.jobs.begin(), shuffled.jobs.end(), rng);
    std::shuffle(shuffled.nodes.begin(), shuffled.nodes.end(), rng);
    const ScheduleResult p = Decide(shuffled);
    int placed = 0;
    for (size_t i = 0; i < c.jobs.size(); ++i) {
      EXPECT_EQ(a.allocations[i].placements, b.allocations[i].placements);
      const auto it = std::find_if(p.allocations.begin(), p.allocations.end(),
                                   [&](const JobAllocation& x) { return x.job == c.jobs[i].key; });
      ASSERT_NE(it, p.allocations.end());
      EXPECT_EQ(it->placements, a.allocations[i].placements) << c.jobs[i].key;
      placed += Workers(a.allocations[i]);
    }
    EXPECT_GT(placed, 0);
    ASSERT_EQ(a.preemptions.size(), p.preemptions.size());
    for (size_t i = 0; i < a.preemptions.size(); ++i) {
      EXPECT_EQ(a.preemptions[i].job, p.preemptions[i].job);
      EXPECT_EQ(a.preemptions[i].node, p.preemptions[i].node);
      EXPECT_EQ(a.preemptions[i].workers, p.preemptions[i].workers);
    }
  }
}

TEST(InterJobSchedulerTest, NeverOversubscribesANode) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    const ClusterState c = RandomCluster(seed);
    const ScheduleResult r = Decide(c);
    std::map<std::string, int> used;
    for (size_t i = 0; i < c.jobs.size(); ++i) {
      const int w = Workers(r.allocations[i]);
      EXPECT_TRUE(w == 0 || (w >= c.jobs[i].minWorkers && w <= c.jobs[i].maxWorkers));
      for (const Placement& p : r.allocations[i].placements) used[p.node] += p.workers;
    }
    for (const NodeGpus& n : c.nodes) {
      EXPECT_LE(used[n.node], n.total - n.inferenceHeld - n.inferencePending) << n.node;
    }
  }
}

TEST(InterJobSchedulerTest, BadCountsAreClampedNotFatal) {
  ClusterState c;
  c.nodes = {Node("n1", "a100", 4, /*held=*/9, /*pending=*/-3), Node("n2", "a100", -2),
             Node("n3", "v100", 2)};
  JobDemand inverted = Job("inverted", 4, 3, 2);  // min > max: never placeable
  inverted.current = {{"n3", "v100", 2}};
  JobDemand zero = Job("zero", 0, 0, 0);
  JobDemand ghost = Job("ghost", 2, 1, 2);
  ghost.current = {{"nowhere", "a100", 2}, {"n3", "h100", 1}};  // unknown slots are dropped
  ghost.speed = {{"v100", std::nan("")}, {"a100", -1.0}};       // bad reports fall back to defaults
  c.jobs = {inverted, zero, ghost};
  const ScheduleResult r = Decide(c);
  EXPECT_EQ(Workers(r.allocations[0]), 0);
  EXPECT_EQ(Workers(r.allocations[1]) + Workers(r.allocations[2]), 2);  // n3's two v100s
  EXPECT_GT(r.totalThroughput, 0.0);
}

double IdleFraction(const JobDemand& j, const JobAllocation& a, const SchedulerOptions& o = {}) {
  double idle = 0.0;
  int workers = 0;
  for (const GpuTypeUse& u : PredictGpuUse(j, a.placements, o)) {
    idle += (1.0 - u.usefulFraction) * u.workers;
    workers += u.workers;
  }
  return workers > 0 ? idle / workers : 0.0;
}

// ResNet-50, 8 ESTs of 64 samples, on 4 v100 + 4 t4 with the EasyScale
// artifact's measured iteration times (0.2688 s, 0.6591 s): whatever the job
// holds already, its plan stays within the waste bound and is as fast as the
// 4 v100 alone (two ESTs each); the t4s add nothing but idle time.
TEST(InterJobSchedulerTest, HeterogeneousResNet50RespectsTheWasteBound) {
  for (int heldV100 = 0; heldV100 <= 4; ++heldV100) {
    for (int heldT4 = 0; heldT4 <= 4; ++heldT4) {
      ClusterState c;
      c.nodes = {Node("v", "v100", 4), Node("t", "t4", 4)};
      JobDemand j = Job("resnet50", 8, 1, 8);
      j.speed = {{"v100", 64 / 0.2688}, {"t4", 64 / 0.6591}};
      if (heldV100 > 0) j.current.push_back({"v", "v100", heldV100});
      if (heldT4 > 0) j.current.push_back({"t", "t4", heldT4});
      c.jobs = {j};
      const ScheduleResult r = Decide(c);
      SCOPED_TRACE(testing::Message() << "held v100 " << heldV100 << ", t4 " << heldT4);
      EXPECT_LE(IdleFraction(j, r.allocations[0]), SchedulerOptions{}.maxIdleFraction);
      EXPECT_NEAR(r.allocations[0].throughput, 8 * 64 / (2 * 0.2688), 1e-6);
      EXPECT_EQ(Workers(r.allocations[0], "t4"), 0);
    }
  }
}

// Where a slow type still shortens the step, the bound decides: 14 ESTs on
// 1 fast + 8 slow GPUs (3.1x) would run 43% idle with all of them.
TEST(InterJobSchedulerTest, WasteBoundKeepsIdleGpusForOthers) {
  ClusterState c;
  c.nodes = {Node("v", "v100", 1), Node("t", "t4", 8)};
  JobDemand j = Job("j", 14, 1, 14);
  j.speed = {{"v100", 3.1}, {"t4", 1.0}};
  c.jobs = {j};
  SchedulerOptions unbounded;
  unbounded.maxIdleFraction = 1.0;
  const ScheduleResult loose = Decide(c, unbounded);
  EXPECT_GT(IdleFraction(j, loose.allocations[0]), 0.30);
  const ScheduleResult bounded = Decide(c);
  EXPECT_LE(IdleFraction(j, bounded.allocations[0]), 0.30);
  EXPECT_LT(Workers(bounded.allocations[0], "t4"), Workers(loose.allocations[0], "t4"));
}

// NCF steps ~5,000x more samples/s than BERT; in absolute gains every GPU
// looks best on NCF (it got 3 of 4). Relative gains split them evenly.
TEST(InterJobSchedulerTest, ComparesGainsAcrossModelsInRelativeTerms) {
  ClusterState c;
  c.nodes = {Node("v", "v100", 4)};
  JobDemand ncf = Job("ncf", 8, 1, 8, 0, 1);
  ncf.speed = {{"v100", 1024 / 0.0105}};
  JobDemand bert = Job("bert", 8, 1, 8, 0, 2);
  bert.speed = {{"v100", 8 / 0.4406}};
  c.jobs = {ncf, bert};
  const ScheduleResult r = Decide(c);
  EXPECT_EQ(Workers(r.allocations[0]), 2);
  EXPECT_EQ(Workers(r.allocations[1]), 2);
}

TEST(AssignEstsTest, SpreadsEstsInProportionToSpeed) {
  StatusOr<EstAssignment> a = AssignEsts(10, {"h200", "t4", "t4"}, {}, SchedulerOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(ValidateAssignment(*a).ok());
  EXPECT_EQ(a->workers[0].size(), 8u);  // 8/4.0 = 2 s, and 1/0.6 = 1.67 s on each t4
  EXPECT_EQ(*a, *AssignBySpeed(10, {4.0, 0.6, 0.6}));
  // A reported speed overrides the default.
  a = AssignEsts(10, {"h200", "t4"}, {{"t4", 4.0}}, SchedulerOptions{});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->workers[0].size(), 5u);
  EXPECT_FALSE(AssignEsts(2, {"a100", "a100", "a100"}, {}, SchedulerOptions{}).ok());
}

}  // namespace
}  // namespace easyscale::op
