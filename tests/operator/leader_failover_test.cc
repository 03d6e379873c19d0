// Two operator processes with leader election: SIGKILL the leader mid-job; the
// standby takes over through the Lease, finds the job's pods and status intact,
// and goes on reconciling (a release scales the job out).
#include <gtest/gtest.h>
#include <signal.h>

#include "pod_runtimes.h"
#include "test_cluster.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

TEST(OperatorLeaderElection, StandbyTakesOverAfterLeaderIsKilled) {
  TestCluster c("operator-failover");
  ASSERT_TRUE(c.StartApiServer().ok());
  ASSERT_TRUE(c.AddTwoNodesWithInference("inf-1").ok());
  c.StartKubelet(std::make_unique<ProtocolWorkerRuntime>(50ms));
  const std::string service = c.StartControlService();
  const std::vector<std::string> election = FastLeaderElectionArgs();
  OperatorProcess* a = c.StartOperator("op-a", election, service);
  ASSERT_TRUE(Eventually([&] { return a->Ready(); })) << a->LogTail();
  OperatorProcess* b = c.StartOperator("op-b", election, service);
  ASSERT_TRUE(Eventually([&] { return b->Get(b->healthPort, "/healthz") == 200; }));
  EXPECT_EQ(c.LeaseHolder(), "op-a");
  EXPECT_EQ(b->Get(b->healthPort, "/readyz"), 503);  // the standby takes no traffic

  json spec = {{"image", "easyscale/worker:test"},
               {"ests", 8},
               {"maxWorkers", 4},
               {"training", {{"steps", 100000}}},
               {"checkpoint", {{"mountPath", "/ckpt"}}}};
  ASSERT_TRUE(c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("step", 0) > 3; }));
  const json before = c.JobStatus("j");
  std::set<std::string> pods;
  for (const json& p : c.WorkerPods("j")) pods.insert(p["metadata"]["name"].get<std::string>());
  ASSERT_EQ(pods.size(), 2u);

  a->process->Signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually([&] { return c.LeaseHolder() == "op-b"; }, 10s));
  const double takeover =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_LT(takeover, 5.0);
  ASSERT_TRUE(Eventually([&] { return b->Ready(); })) << b->LogTail();

  // Nothing was lost: same pods, same generation; training goes on through b.
  std::set<std::string> after;
  for (const json& p : c.WorkerPods("j")) after.insert(p["metadata"]["name"].get<std::string>());
  EXPECT_EQ(after, pods);
  EXPECT_EQ(c.JobStatus("j")["generation"], before["generation"]);
  const int64_t step = c.JobStatus("j").value("step", 0);
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("step", 0) > step + 3; }));

  // And b reconciles: a release scales the job out.
  ASSERT_TRUE(c.client().Delete(kPods, "default", "inf-1").ok());
  ASSERT_TRUE(Eventually([&] {
    const json st = c.JobStatus("j");
    return st.value("workers", json::array()).size() == 4 &&
           st.value("runningGeneration", 0) > before["generation"];
  }));
  EXPECT_EQ(c.EventCount("j", "ScaledOut"), 1);
}

}  // namespace
}  // namespace easyscale::op::testing

namespace easyscale::op::testing {
namespace {

TEST(OperatorLeaderElection, LeaderThatCannotRenewStopsActingAndExits) {
  TestCluster c("operator-lost-lease");
  ASSERT_TRUE(c.StartApiServer().ok());
  OperatorProcess* a =
      c.StartOperator("op-a", {"--leader-elect", "--lease-namespace", "default", "--lease-duration",
                               "2", "--renew-deadline", "1", "--retry-period", "0.2"});
  ASSERT_TRUE(Eventually([&] { return a->Ready(); })) << a->LogTail();
  c.server().FailNextRequests(1000000, 500);  // the API server answers nothing useful
  ASSERT_TRUE(Eventually([&] { return a->process->Poll().has_value(); }, 10s));
  EXPECT_EQ(*a->process->Poll(), 1);  // exits: a restarted replica rejoins as a candidate
  c.server().FailNextRequests(0, 500);
}

}  // namespace
}  // namespace easyscale::op::testing
