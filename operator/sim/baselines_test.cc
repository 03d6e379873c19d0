#include "baselines.h"

#include <gtest/gtest.h>

namespace easyscale::sim {
namespace {

int Workers(const op::JobAllocation& a, const std::string& type = "") {
  int n = 0;
  for (const op::Placement& p : a.placements)
    n += type.empty() || p.gpuType == type ? p.workers : 0;
  return n;
}

op::JobDemand Job(const std::string& key, int ests, int64_t order,
                  std::map<std::string, double> speed) {
  op::JobDemand j;
  j.key = key;
  j.ests = ests;
  j.maxWorkers = ests;
  j.submitOrder = order;
  j.speed = std::move(speed);
  return j;
}

TEST(PaperPolicyTest, NewJobsStartOnTheirLowestProposal) {
  op::ClusterState c;
  c.nodes = {{"v", "v100", 4}, {"t", "t4", 4}};
  c.jobs = {Job("a", 8, 0, {{"v100", 4.0}, {"t4", 1.0}})};
  const op::ScheduleResult r = PaperPolicy(c, op::SchedulerOptions{});
  EXPECT_EQ(Workers(r.allocations[0]), 1);
  EXPECT_EQ(Workers(r.allocations[0], "t4"), 1);  // the slowest type
}

TEST(PaperPolicyTest, StepsUpAtMostDoublingOncePerRoundByRelativeSpeedup) {
  op::ClusterState c;
  c.nodes = {{"v", "v100", 8}};
  // Equal samples/s would tie; relative speedups do not: b on 2 of 8 ESTs
  // gains 100% from 2 more, a on 1 of 2 ESTs gains 100% from 1 more.
  op::JobDemand a = Job("a", 2, 0, {{"v100", 100.0}});
  a.current = {{"v", "v100", 1}};
  op::JobDemand b = Job("b", 8, 1, {{"v100", 1.0}});
  b.current = {{"v", "v100", 2}};
  c.jobs = {a, b};
  op::ScheduleResult r = PaperPolicy(c, op::SchedulerOptions{});
  EXPECT_EQ(Workers(r.allocations[0]), 2);
  EXPECT_EQ(Workers(r.allocations[1]), 4);  // doubled, not 6: one step, at most x2
  // With one GPU left, the larger relative gain per GPU wins it.
  c.nodes = {{"v", "v100", 4}};
  r = PaperPolicy(c, op::SchedulerOptions{});
  EXPECT_EQ(Workers(r.allocations[0]), 2);  // +100% for one GPU
  EXPECT_EQ(Workers(r.allocations[1]), 2);  // +50% per GPU needs two
}

TEST(PaperPolicyTest, NeverStepsUpIntoAPlanAboveTheWasteCap) {
  op::ClusterState c;
  c.nodes = {{"v", "v100", 1}, {"t", "t4", 9}};
  // 14 ESTs on 1 fast (3.1x) + 4 slow GPUs step in 2 s, all busy. Five more
  // slow ones (the best t4 step-up) cut it to 1.6 s but leave 34% of the GPU
  // time idle (four more: 43%): over the cap.
  op::JobDemand j = Job("j", 14, 0, {{"v100", 3.1}, {"t4", 1.0}});
  j.current = {{"t", "t4", 4}, {"v", "v100", 1}};
  c.jobs = {j};
  EXPECT_EQ(Workers(PaperPolicy(c, op::SchedulerOptions{}).allocations[0]), 5);
  op::SchedulerOptions loose;
  loose.maxIdleFraction = 1.0;
  EXPECT_EQ(Workers(PaperPolicy(c, loose).allocations[0], "t4"), 9);
}

TEST(YarnCsTest, RunsOnlyTheEarliestJobOnItsFullGang) {
  op::ClusterState c;
  c.nodes = {{"v1", "v100", 8}, {"v2", "v100", 8}, {"t", "t4", 8}};
  op::JobDemand late = Job("late", 2, 5, {});
  late.gpuTypes = {"t4"};
  op::JobDemand early = Job("early", 12, 1, {});
  early.gpuTypes = {"v100"};
  c.jobs = {late, early};
  const op::ScheduleResult r = YarnCs(c, op::SchedulerOptions{});
  EXPECT_EQ(Workers(r.allocations[0]), 0);  // waits although t4s are free
  EXPECT_EQ(Workers(r.allocations[1], "v100"), 12);
}

}  // namespace
}  // namespace easyscale::sim
