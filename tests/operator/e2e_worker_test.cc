// End to end with REAL `easyscale-worker k8s` processes in the isolated test
// cluster: every pod has a network namespace and address of its own and
// private volumes, like pods on separate nodes, so workers meet, hand ESTs
// over and recover only through the network. Inference comes and goes, a
// worker is SIGKILLed mid-step, the leading operator is SIGKILLed, and the
// final digest equals that of a fixed 8-worker run
// (`easyscale-worker local --schedule 0:8`). Needs root (CI is root).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "controller/job_status.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/subprocess.h"
#include "pod_runtimes.h"
#include "test_cluster.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

json Spec(int64_t steps, int maxWorkers, const json& checkpoint) {
  return {{"image", "easyscale/worker:test"},
          {"ests", 8},
          {"maxWorkers", maxWorkers},
          {"training", {{"model", "mlp"}, {"steps", steps}, {"checkpointEvery", 20}}},
          {"checkpoint", checkpoint}};
}

class IsolatedEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for the pods' namespaces (CI runs as root)";
    worker_ = WorkerBinary();
    ASSERT_FALSE(worker_.empty()) << "easyscale-worker is not built";
  }

  // Two operators electing a leader behind the control Service, as the chart
  // runs them; workers reach it over the pod network.
  void StartOperators(TestCluster& c, std::map<std::string, std::string> workerEnv = {}) {
    c.StartKubelet(WorkerRuntime(worker_, c.dir(), false, std::move(workerEnv)));
    const std::string service = c.StartControlService();
    std::vector<std::string> args = FastLeaderElectionArgs();
    args.insert(args.end(), {"--worker-backend", "cpu", "--worker-command", worker_,
                             "--max-restart-backoff", "2"});
    leader_ = c.StartOperator("op-a", args, service);
    ASSERT_TRUE(Eventually([&] { return leader_->Ready(); })) << leader_->LogTail();
    standby_ = c.StartOperator("op-b", args, service);
  }

  // Job "j" of `steps` with a durable-checkpoint claim, on `nodes` nodes of
  // one h100 each; returns the fixed run's digest of those steps.
  std::string StartJobWithAClaim(TestCluster& c, int64_t steps, int nodes) {
    const std::string reference = FixedRunDigest(worker_, c.dir(), steps);
    std::vector<NodeSpec> specs;
    for (int i = 1; i <= nodes; ++i) specs.push_back({"n" + std::to_string(i), "h100", 1});
    EXPECT_TRUE(c.AddNodes(specs).ok());
    StartOperators(c);
    const json claim = {{"claimName", "ckpt"}, {"mountPath", "/var/lib/easyscale-e2e-ckpt"}};
    EXPECT_TRUE(c.client()
                    .Create(kEasyScaleJobs, "default", EasyScaleJob("j", Spec(steps, nodes, claim)))
                    .ok());
    return reference;
  }

  static std::set<std::string> Nodes(const json& status) {
    std::set<std::string> nodes;
    for (const json& w : status.value("workers", json::array())) nodes.insert(w["node"]);
    return nodes;
  }
  static int64_t Step(TestCluster& c) { return c.JobStatus("j").value("step", int64_t{0}); }

  std::string worker_;
  OperatorProcess* leader_ = nullptr;
  OperatorProcess* standby_ = nullptr;
};

// Scale-out on a GPU release (to 3 nodes), preemption when inference returns,
// a worker SIGKILLed mid-step, and the leader SIGKILLed: no claim, no shared
// folder, and the fixed run's digest.
TEST_F(IsolatedEndToEnd, ElasticJobSurvivesEveryEventWithTheFixedRunDigest) {
  TestCluster c("e2e-elastic", {.isolatePods = true});
  ASSERT_TRUE(c.StartApiServer().ok());
  const int64_t steps = 2000;  // ~25 s: long enough for every event below
  const std::string reference = FixedRunDigest(worker_, c.dir(), steps);
  ASSERT_EQ(reference.size(), 64u) << "the fixed 8-worker run printed no digest";
  // Inference holds n1; the job starts on n2 and n3 (4 ESTs a worker) and a
  // release of n1 halves that: a scale-out worth making.
  ASSERT_TRUE(c.AddNodes({{"n1", "h100", 2}, {"n2", "h100", 1}, {"n3", "h100", 1}}).ok());
  ASSERT_TRUE(c.client().Create(kPods, "default", InferencePod("inf-1", "n1", 2)).ok());
  ASSERT_NO_FATAL_FAILURE(StartOperators(c));
  ASSERT_TRUE(
      c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", Spec(steps, 4, {}))).ok());
  ASSERT_TRUE(Eventually([&] { return Step(c) >= 20; }, 60s)) << c.dir();
  EXPECT_EQ(Nodes(c.JobStatus("j")), (std::set<std::string>{"n2", "n3"}));

  // Inference leaves n1: the job scales out to it; the new workers take the
  // state from the running ones over the network.
  ASSERT_TRUE(c.client().Delete(kPods, "default", "inf-1").ok());
  ASSERT_TRUE(Eventually(
      [&] {
        const json st = c.JobStatus("j");
        return st.value("runningGeneration", 0) == st.value("generation", 0) &&
               st.value("workers", json::array()).size() == 4;
      },
      60s))
      << c.JobStatus("j");
  EXPECT_EQ(Nodes(c.JobStatus("j")).size(), 3u);
  EXPECT_EQ(c.JobStatus("j")["restore"]["from"], "Peers");
  int64_t step = Step(c);
  ASSERT_TRUE(Eventually([&] { return Step(c) > step + 5; }, 60s));

  // Inference comes back for one GPU of n1: one worker is preempted and its
  // GPU goes to the inference pod.
  ASSERT_TRUE(c.client().Create(kPods, "default", InferencePod("inf-2", "n1", 1)).ok());
  ASSERT_TRUE(Eventually([&] { return c.EventCount("j", "Preempted") == 1; }, 60s));
  ASSERT_TRUE(Eventually(
      [&] {
        StatusOr<json> p = c.client().Get(kPods, "default", "inf-2");
        return p.ok() && (*p)["status"].value("phase", "") == "Running";
      },
      60s));
  step = Step(c);
  ASSERT_TRUE(Eventually([&] { return Step(c) > step + 5; }, 60s));

  // A worker is SIGKILLed mid-step: the others hold its ESTs' contexts as of
  // the last step; the job goes on without a checkpoint.
  const json before = c.JobStatus("j");
  const std::string victim = before["workers"].back()["pod"];
  c.SignalPod("default/" + victim, SIGKILL);
  ASSERT_TRUE(Eventually([&] { return c.EventCount("j", "WorkerLost") == 1; }, 60s));
  ASSERT_TRUE(Eventually(
      [&] {
        const json st = c.JobStatus("j");
        return st.value("runningGeneration", 0) > before.value("generation", 0) &&
               st.value("runningGeneration", 0) == st.value("generation", 0);
      },
      60s))
      << c.JobStatus("j");
  EXPECT_EQ(c.JobStatus("j")["restore"]["from"], "Peers");
  step = Step(c);
  ASSERT_TRUE(Eventually([&] { return Step(c) > step + 5; }, 60s));

  // The leading operator is SIGKILLed: the standby takes over; the workers
  // meet it through the Service and carry on.
  ASSERT_EQ(c.LeaseHolder(), "op-a");
  leader_->process->Signal(SIGKILL);
  ASSERT_TRUE(Eventually([&] { return c.LeaseHolder() == "op-b"; }, 20s));
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("phase", "") == "Succeeded"; }, 180s))
      << c.JobStatus("j") << " in " << c.dir();
  EXPECT_EQ(c.JobStatus("j")["digest"], reference);
  EXPECT_EQ(c.JobStatus("j").value("restarts", 0), 1) << "the SIGKILL, and only it, is a failure";
  EXPECT_GE(c.EventCount("j", "ScaledOut"), 1);
  const json done = c.JobStatus("j");
  const json* durable = FindCondition(done["conditions"], "DurableCheckpoint");
  ASSERT_NE(durable, nullptr);
  EXPECT_EQ((*durable)["reason"], "NoClaim");
}

// The consistency certificate: a cluster run that scales out mid-training
// keeps, in its history ConfigMap, the very (step, digest) lines that
// `easyscale-worker local` prints for the same job on another worker count
// and schedule; the status and the operator's gauge hold the newest.
TEST_F(IsolatedEndToEnd, ACertifiedClusterRunWithAScaleEventMatchesALocalRun) {
  TestCluster c("e2e-certificate", {.isolatePods = true});
  ASSERT_TRUE(c.StartApiServer().ok());
  const int64_t steps = 1200, every = 100;
  const std::string local =
      LocalRunOutput(worker_, c.dir(),
                     {"--ests", "8", "--schedule", "0:3,500:6", "--steps", std::to_string(steps),
                      "--model", "mlp", "--certificate-every", std::to_string(every)});
  std::vector<std::string> expected;
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(local, '\n'))) {
    if (line.rfind("certificate ", 0) == 0) expected.push_back(line);
  }
  ASSERT_EQ(expected.size(), static_cast<size_t>(steps / every)) << local;
  // Inference holds n1: the job starts on n2 and n3, then scales out to n1.
  ASSERT_TRUE(c.AddNodes({{"n1", "h100", 2}, {"n2", "h100", 1}, {"n3", "h100", 1}}).ok());
  ASSERT_TRUE(c.client().Create(kPods, "default", InferencePod("inf-1", "n1", 2)).ok());
  ASSERT_NO_FATAL_FAILURE(StartOperators(c));
  json spec = Spec(steps, 4, {});
  spec["certificate"] = {{"everySteps", every}};
  ASSERT_TRUE(c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return Step(c) >= 20; }, 60s)) << c.dir();
  ASSERT_TRUE(c.client().Delete(kPods, "default", "inf-1").ok());
  ASSERT_TRUE(Eventually([&] { return c.EventCount("j", "ScaledOut") >= 1; }, 60s));
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("phase", "") == "Succeeded"; }, 180s))
      << c.JobStatus("j") << " in " << c.dir();
  EXPECT_LT(c.JobStatus("j")["restore"].value("step", int64_t{0}), steps)
      << "the scale-out came after the last step: no scale event during training";

  StatusOr<json> cm = c.client().Get(kConfigMaps, "default", "j-certificate");
  ASSERT_TRUE(cm.ok()) << cm.status();
  const std::string history = (*cm)["data"]["certificates"];
  EXPECT_EQ(history, absl::StrJoin(expected, "\n") + "\n");
  EXPECT_EQ((*cm)["metadata"]["ownerReferences"][0]["uid"], c.Job("j")["metadata"]["uid"]);
  const json done = c.JobStatus("j");
  EXPECT_EQ(done["certificate"]["step"], steps);
  EXPECT_EQ(expected.back(), "certificate step=" + std::to_string(steps) +
                                 " digest=" + done["digest"].get<std::string>());
  EXPECT_EQ(done["certificate"]["digest"], done["digest"]);
  std::string metrics;
  ASSERT_EQ(leader_->Get(leader_->metricsPort, "/metrics", &metrics), 200);
  EXPECT_NE(metrics.find("easyscale_job_certified_step{job=\"default/j\"} " +
                         std::to_string(steps) + "\n"),
            std::string::npos)
      << metrics;
}

// With a claim, even every worker killed at once loses nothing but the steps
// since the last durable checkpoint, which are trained again to the same bits.
TEST_F(IsolatedEndToEnd, WithAClaimTheJobSurvivesAllWorkersKilledAtOnce) {
  TestCluster c("e2e-claim", {.isolatePods = true});
  ASSERT_TRUE(c.StartApiServer().ok());
  const int64_t steps = 400;
  const std::string reference = StartJobWithAClaim(c, steps, 3);
  ASSERT_FALSE(HasFatalFailure());  // the operators did not start
  ASSERT_EQ(reference.size(), 64u);
  ASSERT_TRUE(Eventually([&] { return Step(c) >= 60; }, 60s)) << c.dir();
  const json before = c.JobStatus("j");
  ASSERT_GE(before["workers"].size(), 2u);
  for (const json& w : before["workers"])
    c.SignalPod("default/" + w["pod"].get<std::string>(), SIGKILL);
  ASSERT_TRUE(Eventually(
      [&] {
        const json st = c.JobStatus("j");
        return st.value("runningGeneration", 0) > before.value("generation", 0) &&
               st.contains("restore") &&
               st["restore"].value("generation", 0) == st.value("runningGeneration", 0);
      },
      60s))
      << c.JobStatus("j");
  EXPECT_EQ(c.JobStatus("j")["restore"]["from"], "Durable");
  EXPECT_EQ(c.EventCount("j", "StateLost"), 0);
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("phase", "") == "Succeeded"; }, 180s))
      << c.JobStatus("j") << " in " << c.dir();
  EXPECT_EQ(c.JobStatus("j")["digest"], reference);
  // The checkpoints are in the claim, in the job's UID folder.
  const std::string uid = c.Job("j")["metadata"]["uid"];
  EXPECT_TRUE(std::filesystem::exists(c.ClaimDir("default", "ckpt") + "/" + uid + "/LATEST"))
      << "no durable checkpoint under the job's UID";
}

// spec.suspend mid-run: the workers checkpoint into the claim at the next
// step, their pods go; resumed, the job restores exactly that step and ends
// with the digest of the uninterrupted fixed run.
TEST_F(IsolatedEndToEnd, ASuspendedAndResumedJobEndsWithTheUninterruptedRunsDigest) {
  TestCluster c("e2e-suspend", {.isolatePods = true});
  ASSERT_TRUE(c.StartApiServer().ok());
  const int64_t steps = 1500;
  const std::string reference = StartJobWithAClaim(c, steps, 2);
  ASSERT_FALSE(HasFatalFailure());  // the operators did not start
  ASSERT_EQ(reference.size(), 64u);
  ASSERT_TRUE(Eventually([&] { return Step(c) >= 30; }, 60s)) << c.dir();

  ASSERT_TRUE(
      c.client().MergePatch(kEasyScaleJobs, "default", "j", {{"spec", {{"suspend", true}}}}).ok());
  ASSERT_TRUE(Eventually([&] { return c.WorkerPods("j").empty(); }, 60s)) << c.JobStatus("j");
  const json suspended = c.JobStatus("j");
  EXPECT_EQ(suspended["phase"], "Suspended");
  const int64_t at = suspended["step"];
  ASSERT_GT(at, 0);
  ASSERT_LT(at, steps) << "the job ended before the suspension";
  // The drain wrote the step it stopped at, not only the periodic checkpoints.
  const std::string uid = c.Job("j")["metadata"]["uid"];
  char folder[32];
  std::snprintf(folder, sizeof folder, "ckpt-%09lld", static_cast<long long>(at));
  StatusOr<std::string> latest =
      ReadFile(c.ClaimDir("default", "ckpt") + "/" + uid + "/LATEST", 256);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, folder);
  std::this_thread::sleep_for(2s);  // suspended: nothing runs
  EXPECT_TRUE(c.WorkerPods("j").empty());
  EXPECT_EQ(Step(c), at);

  ASSERT_TRUE(
      c.client().MergePatch(kEasyScaleJobs, "default", "j", {{"spec", {{"suspend", false}}}}).ok());
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("phase", "") == "Succeeded"; }, 180s))
      << c.JobStatus("j") << " in " << c.dir();
  const json done = c.JobStatus("j");
  EXPECT_EQ(done["digest"], reference);
  EXPECT_EQ(done["restore"]["from"], "Durable");
  EXPECT_EQ(done.value("restarts", 0), 0) << "the Restarting condition says why: " << done;
  EXPECT_EQ(c.EventCount("j", "StateLost"), 0);
  EXPECT_EQ(c.EventCount("j", "Suspended"), 1);
  EXPECT_EQ(c.EventCount("j", "Resumed"), 1);
  const json* resumed = FindCondition(done["conditions"], "Suspended");
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ((*resumed)["reason"], "Resumed");
}

// The user's model on a claim: the example CNN, exported by PyTorch at test
// time, lies only in the claim's folder; the job names it under the claim's
// mountPath (read-only), the pods see it there and nowhere else, and the job
// trains it to the digest of `easyscale-worker local` on the same file.
TEST_F(IsolatedEndToEnd, AModelFileOnAReadOnlyClaimTrainsToTheLocalRunsDigest) {
  constexpr char kPython[] = "/usr/bin/python3";
  if (!std::filesystem::exists(kPython)) GTEST_SKIP() << kPython << " (python3-torch) is missing";
  TestCluster c("e2e-model-claim", {.isolatePods = true});
  ASSERT_TRUE(c.StartApiServer().ok());
  const std::string claim = c.ClaimDir("default", "models");
  ASSERT_TRUE(MakeDirs(claim).ok());
  StatusOr<CommandResult> exported = RunCommand(
      {.argv = {kPython, std::string(EASYSCALE_SOURCE_DIR) + "/deploy/examples/models/export.py",
                "--model", "cnn", "--width", "4", "--seed", "3", "--out", claim + "/cnn.onnx"},
       .stdoutTo = Output::Pipe(),
       .stderrTo = Output::SameAsStdout()},
      300s);
  ASSERT_TRUE(exported.ok() && exported->exitCode == 0)
      << (exported.ok() ? exported->out : exported.status().ToString());
  const int64_t steps = 40;
  const std::string reference =
      FixedRunDigest(worker_, c.dir(), steps, {"--model-file", claim + "/cnn.onnx"});
  ASSERT_EQ(reference.size(), 64u) << "the local run printed no digest";

  ASSERT_TRUE(c.AddNodes({{"n1", "h100", 1}, {"n2", "h100", 1}}).ok());
  ASSERT_NO_FATAL_FAILURE(StartOperators(c));
  // A mount point no host process has a file under: only the pods' mount shows the model.
  const std::string mount = "/var/lib/easyscale-e2e-models";
  json spec = Spec(steps, 2, {});
  spec["training"] = {{"model", "file"},
                      {"modelFile", mount + "/cnn.onnx"},
                      {"steps", steps},
                      {"checkpointEvery", 20}};
  spec["worker"]["volumes"] = json::array(
      {{{"name", "models"}, {"claimName", "models"}, {"mountPath", mount}, {"readOnly", true}}});
  ASSERT_TRUE(c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("phase", "") == "Succeeded"; }, 180s))
      << c.JobStatus("j") << " in " << c.dir();
  EXPECT_EQ(c.JobStatus("j")["digest"], reference);
  EXPECT_FALSE(std::filesystem::exists(mount + "/cnn.onnx")) << "the model leaked to the host";
  for (const json& pod : c.WorkerPods("j")) {
    EXPECT_EQ(pod["spec"]["containers"][0]["volumeMounts"].back(),
              json({{"name", "models"}, {"mountPath", mount}, {"readOnly", true}}));
  }

  // A model file missing from the claim fails the job, naming the file. (Once
  // the first job's pods are gone, so that this one starts on both nodes.)
  ASSERT_TRUE(Eventually([&] { return c.WorkerPods("j").empty(); }, 60s));
  spec["training"]["modelFile"] = mount + "/missing.onnx";
  ASSERT_TRUE(c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("m", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("m").value("phase", "") == "Failed"; }, 120s))
      << c.JobStatus("m") << " in " << c.dir();
  const json failed = c.JobStatus("m");
  const json* why = FindCondition(failed["conditions"], "Failed");
  ASSERT_NE(why, nullptr);
  EXPECT_NE((*why)["message"].get<std::string>().find(mount + "/missing.onnx"), std::string::npos)
      << *why;

  // A model file outside the job's volumes is refused by the API server (the
  // CRD's rule) before any pod starts, naming the field. (The operator's own
  // check of it, for jobs an older CRD let in, is in job_controller_test.cc.)
  spec["training"]["modelFile"] = "/opt/cnn.onnx";
  StatusOr<json> refused = c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("k", spec));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("spec.training.modelFile: Invalid value: \"object\": "
                                            "training.modelFile must lie inside the mountPath of "
                                            "one of worker.volumes"),
            std::string::npos)
      << refused.status();
}

// The shortcut the workers used to take, files in one folder every pod sees,
// is gone: the job's mount path on the host is a plain file nobody may use,
// and the job still succeeds with the fixed run's digest.
TEST_F(IsolatedEndToEnd, NoHostFolderIsSharedByThePods) {
  TestCluster c("e2e-no-shared-folder", {.isolatePods = true});
  ASSERT_TRUE(c.StartApiServer().ok());
  const int64_t steps = 120;
  const std::string reference = FixedRunDigest(worker_, c.dir(), steps);
  ASSERT_EQ(reference.size(), 64u);
  ASSERT_TRUE(c.AddNodes({{"n1", "a100", 1}, {"n2", "h100", 1}, {"n3", "h100", 1}}).ok());
  const std::string shared = c.dir() + "/shared";
  std::ofstream(shared) << "not a folder\n";
  ASSERT_NO_FATAL_FAILURE(StartOperators(c));
  ASSERT_TRUE(c.client()
                  .Create(kEasyScaleJobs, "default",
                          EasyScaleJob("j", Spec(steps, 3, {{"mountPath", shared}})))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("phase", "") == "Succeeded"; }, 120s))
      << c.JobStatus("j") << " in " << c.dir();
  EXPECT_EQ(c.JobStatus("j")["digest"], reference);
  EXPECT_TRUE(std::filesystem::is_regular_file(shared));
  EXPECT_EQ(std::filesystem::file_size(shared), 13u);
}

// A worker that cannot reach its peers (its routes to the other pods are
// black holes; the operator it still reaches): the job says why in its
// conditions and Events, backs off, and fails past the limit instead of
// starting generation after generation.
TEST_F(IsolatedEndToEnd, AWorkerThatCannotReachItsPeersFailsTheJobWithTheReason) {
  TestCluster c("e2e-unreachable", {.isolatePods = true});
  ASSERT_TRUE(c.StartApiServer().ok());
  // One GPU type: the scheduler has no faster type to trade the cut worker
  // for, so its loss shows as a failure, never as a scale-in.
  ASSERT_TRUE(c.AddNodes({{"n1", "h100", 1}, {"n2", "h100", 1}}).ok());
  ASSERT_NO_FATAL_FAILURE(StartOperators(c, {{"EASYSCALE_PEER_TIMEOUT_SECONDS", "2"}}));
  json spec = Spec(100000, 2, {});
  spec["runPolicy"] = {{"backoffLimit", 2}};
  ASSERT_TRUE(c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", spec)).ok());
  // The scheduler may start the job on the first node it sees and scale out
  // once it sees the second: wait for the two-worker generation to train.
  ASSERT_TRUE(Eventually(
      [&] { return c.JobStatus("j").value("workers", json::array()).size() == 2 && Step(c) >= 5; },
      60s))
      << c.JobStatus("j") << " in " << c.dir();
  const json pods = c.JobStatus("j")["workers"];
  ASSERT_EQ(pods.size(), 2u);
  // Cut pod 0 off from pod 1 (both ways: its answers cannot get back either).
  StatusOr<json> victim = c.client().Get(kPods, "default", pods[0]["pod"]);
  StatusOr<json> peer = c.client().Get(kPods, "default", pods[1]["pod"]);
  ASSERT_TRUE(victim.ok() && peer.ok());
  const std::string netns = c.PodNetns("default/" + pods[0]["pod"].get<std::string>());
  ASSERT_FALSE(netns.empty());
  StatusOr<CommandResult> cut = RunCommand(
      {.argv = {"ip", "netns", "exec", std::filesystem::path(netns).filename().string(), "ip",
                "route", "add", "blackhole", (*peer)["status"]["podIP"].get<std::string>() + "/32"},
       .stderrTo = Output::Pipe()},
      10s);
  ASSERT_TRUE(cut.ok() && cut->exitCode == 0) << (cut.ok() ? cut->err : cut.status().ToString());
  ASSERT_TRUE(Eventually([&] { return c.JobStatus("j").value("phase", "") == "Failed"; }, 90s))
      << c.JobStatus("j") << " in " << c.dir();
  const json st = c.JobStatus("j");
  EXPECT_EQ(st["restarts"], 3);
  const json* failed = FindCondition(st["conditions"], "Failed");
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ((*failed)["reason"], "BackoffLimitExceeded");
  const std::string message = (*failed)["message"];
  // Whichever way the cut showed first: a collective, the meeting, or a state transfer.
  EXPECT_TRUE(message.find("PeerLost") != std::string::npos ||
              message.find("RendezvousFailed") != std::string::npos ||
              message.find("StateUnavailable") != std::string::npos)
      << message;
  EXPECT_EQ(c.EventCount("j", "WorkerFailed"), 3);
  EXPECT_LE(st.value("generation", 0), 4) << "one generation per failure, no loop";
}

}  // namespace
}  // namespace easyscale::op::testing
