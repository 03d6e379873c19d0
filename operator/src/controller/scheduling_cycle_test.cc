// The scheduling cycle alone: marks inside one window arrange one cycle, a
// mark during a cycle arranges the next, and the plan keeps every job's part.
#include "controller/scheduling_cycle.h"

#include <gtest/gtest.h>

#include <thread>

namespace easyscale::op {
namespace {

using namespace std::chrono_literals;

TEST(SchedulingCycle, ManyChangesInOneWindowArrangeOneCycle) {
  WorkQueue queue;
  SchedulingCycle cycle(&queue, SchedulerOptions{}, 200ms);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) cycle.MarkDirty();
  EXPECT_EQ(queue.Len(), 0u);  // waits out the window first
  std::optional<std::string> key = queue.Get();
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(*key, SchedulingCycle::kQueueKey);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  cycle.Begin();
  queue.Done(*key);
  // The 49 other marks left nothing behind.
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(queue.Len(), 0u);

  // A change while a cycle runs is served by the next one.
  cycle.MarkDirty();
  key = queue.Get();
  cycle.Begin();
  cycle.MarkDirty();
  cycle.MarkDirty();
  queue.Done(*key);
  key = queue.Get();
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(*key, SchedulingCycle::kQueueKey);
  queue.Done(*key);
  queue.ShutDown();
}

TEST(SchedulingCycle, KeepsEachJobsPartOfThePlan) {
  WorkQueue queue;
  SchedulingCycle cycle(&queue, SchedulerOptions{}, 100ms);
  ClusterState cluster;
  cluster.nodes = {{.node = "n1", .gpuType = "a100", .total = 4, .inferencePending = 2}};
  JobDemand a{.key = "default/a", .ests = 8, .minWorkers = 1, .maxWorkers = 4};
  a.current = {{"n1", "a100", 4}};
  JobDemand b{.key = "default/b", .ests = 4, .minWorkers = 1, .maxWorkers = 4};
  b.submitOrder = 1;
  cluster.jobs = {a, b};
  EXPECT_FALSE(cycle.PlanFor("default/a").has_value());

  const ScheduleResult result = cycle.Run(cluster);
  EXPECT_EQ(cycle.cycles(), 1);
  std::optional<JobPlan> planA = cycle.PlanFor("default/a");
  ASSERT_TRUE(planA.has_value());
  EXPECT_EQ(planA->cycle, 1);
  EXPECT_EQ(planA->placements, result.allocations[0].placements);
  // Inference claims two of a's four GPUs: a is told to free them now.
  EXPECT_EQ(planA->preempted, 2);
  ASSERT_TRUE(cycle.PlanFor("default/b").has_value());
  EXPECT_FALSE(cycle.PlanFor("default/c").has_value());

  // The next plan replaces the whole previous one.
  cluster.jobs = {b};
  cycle.Run(cluster);
  EXPECT_FALSE(cycle.PlanFor("default/a").has_value());
  EXPECT_EQ(cycle.PlanFor("default/b")->cycle, 2);
  queue.ShutDown();
}

}  // namespace
}  // namespace easyscale::op
