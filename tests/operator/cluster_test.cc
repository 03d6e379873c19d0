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
  ASSERT_TRUE(Eventually([&] { return op->Ready(); })) << c.dir() << op->LogTail();
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

// Two device plugins share a node's GPUs: the NVIDIA plugin, which knows
// nothing of our workers, gives an inference pod the lowest GPU no inference
// pod holds, which rank 0 trains on while rank 1's GPU stays ours. The device
// plugin says so (heldBy and trainingPod on one GPU); rank 0 is the worker
// preempted, and rank 1 trains on.
TEST(OperatorCluster, TheWorkerOnTheGpuInferenceIsGivenIsPreempted) {
  TestCluster c("operator-devices", {.devicePlugins = true});
  ASSERT_TRUE(c.StartApiServer().ok());
  ASSERT_TRUE(c.AddNodes({{"n1", "a100", 2}}).ok());
  c.StartKubelet(std::make_unique<ProtocolWorkerRuntime>(50ms));
  OperatorProcess* op = c.StartOperator("solo", {});
  ASSERT_TRUE(Eventually([&] { return op->Ready(); })) << c.dir() << op->LogTail();
  json spec = kSpec;
  spec["maxWorkers"] = 2;
  ASSERT_TRUE(c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return RunningPodsOn(c, "j", "n1").size() == 2; }));
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("step", 0) > 3; }));
  auto gpus = [&] {
    StatusOr<json> node = c.client().Get(kNodes, "", "n1");
    if (!node.ok()) return json();
    return json::parse((*node)["metadata"]["annotations"].value("easyscale.io/gpus", "null"),
                       nullptr, false);
  };
  ASSERT_TRUE(
      Eventually([&] { return gpus().size() == 2 && gpus()[1]["trainingPod"].is_string(); }));
  EXPECT_EQ(gpus()[0]["trainingPod"], "default/j-w-1-0");  // rank 0
  EXPECT_EQ(gpus()[1]["trainingPod"], "default/j-w-1-1");

  ASSERT_TRUE(c.client().Create(kPods, "default", InferencePod("inf", "n1", 1)).ok());
  ASSERT_TRUE(Eventually([&] { return c.EventCount("j", "Preempted") == 1; })) << c.JobStatus("j");
  ASSERT_TRUE(Eventually([&] {
    const json workers = c.JobStatus("j")["workers"];
    return workers.size() == 1 && workers[0]["pod"] == "j-w-1-1";
  })) << c.JobStatus("j");
  ASSERT_TRUE(
      Eventually([&] { return RunningPodsOn(c, "j", "n1") == std::set<std::string>{"j-w-1-1"}; }));
  ASSERT_TRUE(Eventually([&] { return gpus()[0]["trainingPod"].is_null(); }));
  EXPECT_EQ(gpus()[0]["heldBy"], "default/inf");
  EXPECT_EQ(gpus()[1]["trainingPod"], "default/j-w-1-1");
  const int64_t step = c.JobStatus("j").value("step", int64_t{0});
  EXPECT_TRUE(Eventually([&] { return c.JobStatus("j").value("step", int64_t{0}) > step + 3; }));
  EXPECT_EQ(c.JobStatus("j").value("restarts", 0), 0);
}

}  // namespace
}  // namespace easyscale::op::testing
