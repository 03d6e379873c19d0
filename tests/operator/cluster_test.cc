// The operator process on a simulated 2-node cluster with two GPU types:
// inference pods come and go; the job scales out on releases, is preempted
// when inference returns, and survives API errors and dropped watches.
// Workers are protocol stand-ins (pod_runtimes.h); e2e_worker_test.cc runs
// real ones.
#include <gtest/gtest.h>

#include "pod_runtimes.h"
#include "test_cluster.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const json kSpec = {{"image", "easyscale/worker:test"},
                    {"ests", 8},
                    {"minWorkers", 1},
                    {"maxWorkers", 4},
                    {"training", {{"steps", 100000}}},
                    {"checkpoint", {{"mountPath", "/ckpt"}}}};

std::set<std::string> RunningPodsOn(TestCluster& c, const std::string& job,
                                    const std::string& node) {
  std::set<std::string> out;
  for (const json& p : c.WorkerPods(job)) {
    if (p["spec"]["nodeName"] == node && p["status"].value("phase", "") == "Running") {
      out.insert(p["metadata"]["name"].get<std::string>());
    }
  }
  return out;
}

TEST(OperatorCluster, ScalesOutOnReleasesAndIsPreemptedWhenInferenceReturns) {
  TestCluster c("operator-cluster");
  ASSERT_TRUE(c.StartApiServer().ok());
  ASSERT_TRUE(c.AddTwoNodesWithInference("inf-1").ok());
  c.StartKubelet(std::make_unique<ProtocolWorkerRuntime>(50ms));
  OperatorProcess* op = c.StartOperator("solo", {});
  ASSERT_TRUE(Eventually([&] { return op->Ready(); })) << c.dir();
  ASSERT_TRUE(c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", kSpec)).ok());

  // n1 is busy with inference: the job starts on n2's h100s and trains.
  ASSERT_TRUE(Eventually([&] { return RunningPodsOn(c, "j", "n2").size() == 2; }));
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("step", 0) > 3; }));
  EXPECT_EQ(c.JobStatus("j")["phase"], "Running");
  EXPECT_EQ(c.EventCount("j", "Scheduled"), 1);

  // Inference releases n1: scale out to 4, generation 2 runs after gen 1 checkpoints.
  ASSERT_TRUE(c.client().Delete(kPods, "default", "inf-1").ok());
  ASSERT_TRUE(Eventually([&] { return RunningPodsOn(c, "j", "n1").size() == 2; }));
  ASSERT_TRUE(Eventually([&] {
    const json st = c.JobStatus("j");
    return st.value("runningGeneration", 0) == 2 && st.value("phase", "") == "Running";
  }));
  EXPECT_EQ(c.JobStatus("j")["workers"].size(), 4u);
  EXPECT_EQ(c.EventCount("j", "ScaledOut"), 1);

  // API errors and dropped watches are survived.
  c.server().FailNextRequests(6, 500);
  c.server().DropWatches();
  std::this_thread::sleep_for(300ms);

  // Inference comes back for one GPU of n1: one worker checkpoints and frees it.
  ASSERT_TRUE(Eventually([&] {  // our own requests may meet the injected failures too
    StatusOr<json> p = c.client().Create(kPods, "default", InferencePod("inf-2", "n1", 1));
    return p.ok() || absl::IsAlreadyExists(p.status());
  }));
  ASSERT_TRUE(Eventually([&] {
    StatusOr<json> p = c.client().Get(kPods, "default", "inf-2");
    return p.ok() && (*p)["status"].value("phase", "") == "Running";
  })) << c.dir();
  json st = c.JobStatus("j");
  EXPECT_EQ(st["workers"].size(), 3u);
  EXPECT_EQ(st["preemptions"], 1);
  EXPECT_EQ(RunningPodsOn(c, "j", "n1").size(), 1u);
  EXPECT_EQ(c.EventCount("j", "Preempted"), 1);
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("phase", "") == "Running"; }));
  std::string metrics;
  ASSERT_EQ(op->Get(op->metricsPort, "/metrics", &metrics), 200);
  EXPECT_NE(metrics.find("easyscale_preemptions_total 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("easyscale_reconcile_duration_seconds_count"), std::string::npos);
  EXPECT_EQ(op->Get(op->healthPort, "/healthz"), 200);
}

}  // namespace
}  // namespace easyscale::op::testing
