// End to end with REAL `easyscale-worker k8s` processes started by the
// stand-in kubelet: inference pods come and go on 2 nodes with two GPU types,
// the job scales out and is preempted, and its final digest equals that of a
// fixed 8-worker run (`easyscale-worker local --schedule 0:8`).
#include <gtest/gtest.h>

#include "easyscale/common/subprocess.h"
#include "pod_runtimes.h"
#include "test_cluster.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// The worker part ships `easyscale-worker k8s`; until a build has it the test
// is skipped with the reason.
std::string WorkerWithK8sMode() {
  const std::string bin = WorkerBinary();
  if (bin.empty()) return "";
  StatusOr<CommandResult> probe =
      RunCommand({.argv = {bin, "k8s", "--help"}, .stdoutTo = Output::File("/dev/null")}, 30s);
  return probe.ok() && probe->exitCode == 0 ? bin : "";
}

// Runs the reference: the same training on a fixed layout of 8 workers (one
// EST each) with `easyscale-worker local`, and reads its `digest:` line.
std::string ReferenceDigest(const std::string& bin, const std::string& dir, int64_t steps) {
  StatusOr<CommandResult> r =
      RunCommand({.argv = {bin, "local", "--ests", "8", "--schedule", "0:8", "--model", "mlp",
                           "--steps", std::to_string(steps), "--checkpoint-dir", dir + "/ref-ckpt"},
                  .stdoutTo = Output::Pipe(),
                  .stderrTo = Output::File(dir + "/reference.stderr")},
                 300s);
  if (!r.ok() || r->exitCode != 0) return "";
  const size_t at = r->out.rfind("\ndigest: ");
  return at == std::string::npos ? "" : r->out.substr(at + 9, 64);
}

TEST(OperatorEndToEnd, RealWorkersScaleAndFinishWithTheFixedRunDigest) {
  const std::string worker = WorkerWithK8sMode();
  if (worker.empty()) {
    GTEST_SKIP() << "needs an easyscale-worker with the `k8s` mode (not built yet: "
                    "looked beside easyscale-operator and in build*/bin)";
  }
  TestCluster c("operator-e2e");
  ASSERT_TRUE(c.StartApiServer().ok());
  const int64_t steps = 300;
  const std::string reference = ReferenceDigest(worker, c.dir(), steps);
  ASSERT_EQ(reference.size(), 64u) << "the fixed 8-worker run printed no digest";

  ASSERT_TRUE(c.AddTwoNodesWithInference("inf-1").ok());
  OperatorProcess* op = c.StartWithRealWorkers("e2e", worker);
  ASSERT_TRUE(Eventually([&] { return op->Ready(); }));
  const json spec = {{"image", "easyscale/worker:test"},
                     {"ests", 8},
                     {"maxWorkers", 4},
                     {"training", {{"model", "mlp"}, {"steps", steps}, {"checkpointEvery", 20}}},
                     {"checkpoint", {{"mountPath", c.dir() + "/ckpt"}}}};
  ASSERT_TRUE(c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("step", 0) >= 5; }, 60s)) << c.dir();
  ASSERT_TRUE(c.client().Delete(kPods, "default", "inf-1").ok());  // release: scale out
  ASSERT_TRUE(Eventually(
      [&] {
        const json st = c.JobStatus("j");
        return st.value("runningGeneration", 0) >= 2 &&
               st.value("workers", json::array()).size() > 2;
      },
      60s));
  ASSERT_TRUE(c.client().Create(kPods, "default", InferencePod("inf-2", "n1", 1)).ok());  // preempt
  ASSERT_TRUE(Eventually([&] { return c.EventCount("j", "Preempted") == 1; }, 60s));
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("phase", "") == "Succeeded"; }, 120s))
      << c.dir();
  EXPECT_EQ(c.JobStatus("j")["digest"], reference);
  EXPECT_EQ(c.EventCount("j", "Scheduled"), 1);
  EXPECT_GE(c.EventCount("j", "ScaledOut"), 1);
  // The controller records the Event after it writes the status: wait for it.
  EXPECT_TRUE(Eventually([&] { return c.EventCount("j", "Succeeded") == 1; }, 10s));
  EXPECT_GE(c.JobStatus("j")["preemptions"].get<int>(), 1);
}

}  // namespace
}  // namespace easyscale::op::testing
