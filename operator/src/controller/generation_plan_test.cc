#include "controller/generation_plan.h"

#include <gtest/gtest.h>

#include "controller/gpu_inventory.h"
#include "testing/test_util.h"

namespace easyscale::op {
namespace {

using nlohmann::json;

std::vector<NodePtr> Nodes(const std::vector<json>& nodes) {
  std::vector<NodePtr> out;
  for (const json& n : nodes) out.push_back(std::make_shared<const NodeView>(ParseNode(n)));
  return out;
}

std::vector<PodPtr> Pods(const std::vector<json>& pods) {
  std::vector<PodPtr> out;
  for (const json& p : pods) out.push_back(std::make_shared<const PodView>(ParsePod(p)));
  return out;
}

JobSpec Spec(int ests) {
  JobSpec s;
  s.image = "x";
  s.ests = ests;
  s.maxWorkers = ests;
  return s;
}

void Release(JobStatus* st) {
  if (ReadyToRelease(*st, WallClock::now())) st->runningGeneration = st->generation;
}

// A failed generation is replaced even on the same placements: its workers
// drain (they report holding the state), then the new one runs.
TEST(GenerationPlan, RestartStartsANewGenerationOnTheSamePlacements) {
  JobStatus st;
  ASSERT_TRUE(PlanNextGeneration("j", Spec(8), {{"n1", "a100", 2}}, 0, false, "t0", {}, &st).ok());
  Release(&st);
  auto same = PlanNextGeneration("j", Spec(8), {{"n1", "a100", 2}}, 0, false, "t1", {}, &st);
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->changed);
  auto c = PlanNextGeneration("j", Spec(8), {{"n1", "a100", 2}}, 0, true, "t1", {}, &st);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->changed);
  EXPECT_EQ(c->reason, "Restarted");
  EXPECT_EQ(st.generation, 2);
  EXPECT_EQ(st.draining.size(), 2u);
  EXPECT_EQ(st.workers[0].pod, "j-w-1-0");  // the same pods go on
}

TEST(GenerationPlan, ReleaseWaitsForTheBackoff) {
  JobStatus st;
  ASSERT_TRUE(PlanNextGeneration("j", Spec(8), {{"n1", "a100", 1}}, 0, false, "t0", {}, &st).ok());
  const auto now = WallClock::now();
  st.restartAfter = FormatTime(now + std::chrono::seconds(5));
  EXPECT_FALSE(ReadyToRelease(st, now));
  EXPECT_TRUE(ReadyToRelease(st, now + std::chrono::seconds(6)));
  const auto cap = std::chrono::milliseconds(60000);
  EXPECT_EQ(RestartBackoff(1, cap).count(), 0);
  EXPECT_EQ(RestartBackoff(2, cap).count(), 1000);
  EXPECT_EQ(RestartBackoff(4, cap).count(), 4000);
  EXPECT_EQ(RestartBackoff(40, cap).count(), 60000);
}

TEST(GenerationPlan, FirstPlacementIsScheduledAndRunsAtOnce) {
  JobStatus st;
  auto c = PlanNextGeneration("j", Spec(8), {{"n1", "a100", 2}}, 0, false, "t0", {}, &st);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->changed);
  EXPECT_EQ(c->reason, "Scheduled");
  EXPECT_EQ(st.generation, 1);
  ASSERT_EQ(st.workers.size(), 2u);
  EXPECT_EQ(st.workers[0].pod, "j-w-1-0");
  EXPECT_EQ(st.workers[1].ests, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_TRUE(st.draining.empty());
  Release(&st);
  EXPECT_EQ(st.runningGeneration, 1);
  EXPECT_EQ(PhaseOf(st), JobPhase::kRunning);
  EXPECT_EQ(st.startTime, "t0");
}

TEST(GenerationPlan, UnchangedPlacementIsNoChange) {
  JobStatus st;
  ASSERT_TRUE(PlanNextGeneration("j", Spec(8), {{"n1", "a100", 2}}, 0, false, "t0", {}, &st).ok());
  Release(&st);
  auto c = PlanNextGeneration("j", Spec(8), {{"n1", "a100", 2}}, 0, false, "t1", {}, &st);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->changed);
  EXPECT_EQ(st.generation, 1);
}

TEST(GenerationPlan, ScaleOutKeepsPodsAndDrainsTheRunningGeneration) {
  JobStatus st;
  ASSERT_TRUE(PlanNextGeneration("j", Spec(8), {{"n1", "a100", 2}}, 0, false, "t0", {}, &st).ok());
  Release(&st);
  auto c = PlanNextGeneration("j", Spec(8), {{"n1", "a100", 2}, {"n2", "t4", 2}}, 0, false, "t1",
                              {}, &st);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "ScaledOut");
  EXPECT_EQ(st.generation, 2);
  ASSERT_EQ(st.workers.size(), 4u);
  EXPECT_EQ(st.workers[0].pod, "j-w-1-0");  // kept, same rank
  EXPECT_EQ(st.workers[2].pod, "j-w-2-0");  // new pods named for generation 2
  ASSERT_EQ(st.draining.size(), 2u);
  EXPECT_EQ(st.draining[0].generation, 1);
  EXPECT_EQ(st.draining[0].worldSize, 2);
  Release(&st);
  EXPECT_EQ(st.runningGeneration, 1);  // not before gen 1 checkpointed
  EXPECT_EQ(PhaseOf(st), JobPhase::kScaling);
  int total = 0;
  for (const WorkerRecord& w : st.workers) total += static_cast<int>(w.ests.size());
  EXPECT_EQ(total, 8);
  st.draining.clear();
  Release(&st);
  EXPECT_EQ(st.runningGeneration, 2);
  st.output = {.path = "/models/j", .onnxSha256 = std::string(64, 'd')};
  const json j = ToJson(st);
  EXPECT_EQ(j["workerCount"], 4);
  EXPECT_EQ(j["gpuTypes"], "a100x2,t4x2");
  StatusOr<JobStatus> back = ParseJobStatus(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->workers, st.workers);
  EXPECT_EQ(back->runningGeneration, 2);
  EXPECT_EQ(back->output, st.output);
}

TEST(GenerationPlan, PreemptionToZeroThenRestore) {
  JobStatus st;
  ASSERT_TRUE(PlanNextGeneration("j", Spec(4), {{"n1", "a100", 1}}, 0, false, "t0", {}, &st).ok());
  Release(&st);
  auto c = PlanNextGeneration("j", Spec(4), {}, 1, false, "t1", {}, &st);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "Preempted");
  EXPECT_EQ(st.preemptions, 1);
  EXPECT_TRUE(st.workers.empty());
  EXPECT_EQ(PhaseOf(st), JobPhase::kPreempted);
  st.draining.clear();
  c = PlanNextGeneration("j", Spec(4), {{"n2", "t4", 1}}, 0, false, "t2", {}, &st);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "Restored");
  Release(&st);
  EXPECT_EQ(st.runningGeneration, 3);
}

// Workers that must leave whatever the counts: the NVIDIA plugin, knowing
// nothing of our workers, gave an inference pod rank 0's GPU while rank 1's is
// free (rank 0 must go, not rank 1, which "keep the lowest ranks" would drop),
// or the cluster evicted a worker. A new pod takes the place of one still
// wanted; only the first is a preemption.
TEST(GenerationPlan, WorkersThatMustLeaveAreNeverKept) {
  JobStatus st;
  ASSERT_TRUE(PlanNextGeneration("j", Spec(8), {{"n1", "a100", 2}}, 0, false, "t0", {}, &st).ok());
  Release(&st);
  auto c =
      PlanNextGeneration("j", Spec(8), {{"n1", "a100", 1}}, 1, false, "t1", {}, &st, {"j-w-1-0"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "Preempted");
  ASSERT_EQ(st.workers.size(), 1u);
  EXPECT_EQ(st.workers[0].pod, "j-w-1-1");
  EXPECT_EQ(st.workers[0].rank, 0);
  st.draining.clear();
  Release(&st);

  c = PlanNextGeneration("j", Spec(8), {{"n1", "a100", 1}}, 1, false, "t2", {}, &st, {"j-w-1-1"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "Preempted");
  EXPECT_EQ(st.preemptions, 2);
  ASSERT_EQ(st.workers.size(), 1u);
  EXPECT_EQ(st.workers[0].pod, "j-w-3-0");  // a new pod, which kubelet puts on a free GPU
  c = PlanNextGeneration("j", Spec(8), {{"n1", "a100", 1}}, 0, false, "t3", {}, &st, {"j-w-1-1"});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->changed);  // the pod that left is no longer the job's
  st.draining.clear();
  Release(&st);

  c = PlanNextGeneration("j", Spec(8), {{"n1", "a100", 1}}, 0, false, "t4", {}, &st, {"j-w-3-0"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "Rescheduled");  // evicted: no preemption, no failure
  EXPECT_EQ(st.preemptions, 2);
  EXPECT_EQ(st.restarts, 0);
  EXPECT_EQ(st.workers[0].pod, "j-w-4-0");
}

TEST(GenerationPlan, UnmeasuredSpeedsScaleToTheMeasuredUnit) {
  SchedulerOptions o;
  const auto s = CompleteSpeeds({{"a100", 250.0}}, o);  // 100x the default 2.5
  EXPECT_DOUBLE_EQ(s.at("a100"), 250.0);
  EXPECT_DOUBLE_EQ(s.at("h100"), 350.0);
  EXPECT_TRUE(CompleteSpeeds({}, o).empty());  // nothing measured: the scheduler's defaults
}

TEST(GpuInventory, AnnotationOverLabelsAndInferenceClaims) {
  json node = testing::GpuNode("n1", "a100", 4);
  EXPECT_EQ(NodeGpusByType(node), (std::map<std::string, int>{{"a100", 4}}));
  node["metadata"]["annotations"]["easyscale.io/gpus"] =
      R"([{"id":"0","type":"a100","healthy":true},{"id":"1","type":"a100","healthy":false},{"id":"2","type":"a100"}])";
  EXPECT_EQ(NodeGpusByType(node), (std::map<std::string, int>{{"a100", 2}}));
  node["metadata"]["annotations"]["easyscale.io/gpus"] =
      R"([{"id":"0","type":"h100","heldBy":"serving/llm-0"},{"id":"1","type":"h100","heldBy":null},)"
      R"({"id":"2","type":"warp-drive"}])";
  EXPECT_EQ(NodeGpusByType(node),
            (std::map<std::string, int>{{"h100", 2}}));  // unknown type left out
  std::vector<NodeGpus> held = BuildNodeGpus(Nodes({node}), {}, {}, {});
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].inferenceHeld, 1);  // the plugin's heldBy, without any pod seen
  node["metadata"]["annotations"]["easyscale.io/gpus"] =
      R"([{"id":"0","type":"h100","heldBy":"serving/llm-0","trainingPod":"jobs/j-w-1-0"},)"
      R"({"id":"1","type":"h100","trainingPod":"jobs/j-w-1-1"}])";
  EXPECT_EQ(ParseNode(node).inventory.workersBesideInference,
            std::set<std::string>{"jobs/j-w-1-0"});  // the NVIDIA plugin gave llm-0 its GPU
  node["metadata"]["annotations"]["easyscale.io/gpus"] = "not json";
  EXPECT_EQ(NodeGpusByType(node), (std::map<std::string, int>{{"a100", 4}}));  // falls back
  node["spec"]["unschedulable"] = true;
  EXPECT_TRUE(NodeGpusByType(node).empty());

  json running = testing::InferencePod("a", "n1", 2);
  running["metadata"]["namespace"] = "default";
  running["status"]["phase"] = "Running";
  json pending = testing::InferencePod("b", "n1", 1);
  pending["metadata"]["namespace"] = "default";
  pending["status"]["phase"] = "Pending";
  std::vector<NodeGpus> g =
      BuildNodeGpus(Nodes({testing::GpuNode("n1", "a100", 4)}), Pods({running, pending}), {}, {});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].total, 4);
  EXPECT_EQ(g[0].inferenceHeld, 2);
  EXPECT_EQ(g[0].inferencePending, 1);
  // A draining worker's GPU is the one the pending pod waits for.
  g = BuildNodeGpus(Nodes({testing::GpuNode("n1", "a100", 4)}), Pods({running, pending}),
                    {{"n1", {{"a100", 1}}}}, {});
  EXPECT_EQ(g[0].inferenceHeld, 3);
  EXPECT_EQ(g[0].inferencePending, 0);
  EXPECT_EQ(g[0].total, 4);
  // Being deleted: the running pod holds its GPUs until the kubelet has stopped
  // it; the pending one will never start.
  running["metadata"]["deletionTimestamp"] = "2026-12-02T22:00:00Z";
  pending["metadata"]["deletionTimestamp"] = "2026-12-02T22:00:00Z";
  g = BuildNodeGpus(Nodes({testing::GpuNode("n1", "a100", 4)}), Pods({running, pending}), {}, {});
  EXPECT_EQ(g[0].inferenceHeld, 2);
  EXPECT_EQ(g[0].inferencePending, 0);
  running["status"]["phase"] = "Succeeded";
  g = BuildNodeGpus(Nodes({testing::GpuNode("n1", "a100", 4)}), Pods({running, pending}), {}, {});
  EXPECT_EQ(g[0].inferenceHeld, 0);
}

// kube marks a pod the cluster ends (an eviction, scheduler preemption, the
// taint manager, node pressure) with the DisruptionTarget condition.
TEST(GpuInventory, APodTheClusterEndsIsDisrupted) {
  json pod = testing::InferencePod("w", "n1", 1);
  EXPECT_FALSE(ParsePod(pod).Disrupted());
  pod["status"]["conditions"] = json::array(
      {{{"type", "Ready"}, {"status", "True"}},
       {{"type", "DisruptionTarget"}, {"status", "False"}, {"reason", "EvictionByEvictionAPI"}}});
  EXPECT_FALSE(ParsePod(pod).Disrupted());
  pod["status"]["conditions"][1]["status"] = "True";
  EXPECT_EQ(ParsePod(pod).disruptionReason, "EvictionByEvictionAPI");
  pod["status"]["conditions"][1].erase("reason");
  EXPECT_EQ(ParsePod(pod).disruptionReason, "DisruptionTarget");
}

// A cycle that scales job A in on a node may give A's GPUs to job B at once:
// while A's workers drain, B's planned workers already count on them. The
// draining GPUs must keep new placements off (none is idle) but must not cut
// the node below what the plans hold: the scheduler would read a lost GPU and
// "preempt" B for inference that does not exist, B's drain would read as the
// next lost GPU, and the cluster would rescale without end.
TEST(GpuInventory, DrainingWorkersNeverCutTheNodeBelowThePlannedWorkers) {
  const std::vector<NodePtr> node = Nodes({testing::GpuNode("n1", "a100", 8)});
  // 3 of A's workers drain; the plans hold all 8 GPUs (B has the 3).
  std::vector<NodeGpus> g =
      BuildNodeGpus(node, {}, {{"n1", {{"a100", 3}}}}, {{"n1", {{"a100", 8}}}});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].total - g[0].inferenceHeld - g[0].inferencePending, 8);
  // Nobody took them: they stay off limits until the drained pods are gone.
  g = BuildNodeGpus(node, {}, {{"n1", {{"a100", 3}}}}, {{"n1", {{"a100", 5}}}});
  EXPECT_EQ(g[0].total - g[0].inferenceHeld - g[0].inferencePending, 5);
  // An inference pod that waits on the node still takes a draining GPU, and
  // one that waits for a GPU nobody drains for still makes room for itself.
  json pending = testing::InferencePod("inf", "n1", 2);
  pending["metadata"]["namespace"] = "default";
  g = BuildNodeGpus(node, Pods({pending}), {{"n1", {{"a100", 1}}}}, {{"n1", {{"a100", 7}}}});
  EXPECT_EQ(g[0].inferenceHeld, 1);
  EXPECT_EQ(g[0].inferencePending, 1);
  EXPECT_EQ(g[0].total - g[0].inferenceHeld - g[0].inferencePending, 6);  // 1 worker to preempt
}

TEST(GpuInventory, CountsGpusByStateFromThePodsThatHoldThem) {
  auto worker = [](const std::string& name, const std::string& phase) {
    json p = testing::PlainPod(name, {{"easyscale.io/role", "worker"},
                                      {"easyscale.io/job", "j"},
                                      {"easyscale.io/gpu-type", "a100"}});
    p["spec"]["nodeName"] = "n1";
    p["status"]["phase"] = phase;
    return p;
  };
  json inference = testing::InferencePod("inf", "n1", 1);
  inference["status"]["phase"] = "Running";
  json stopping = worker("w-2", "Running");  // being deleted, still running: holds its GPU
  stopping["metadata"]["deletionTimestamp"] = "2026-12-02T22:00:00Z";
  const std::vector<json> nodes = {testing::GpuNode("n1", "a100", 4),
                                   testing::GpuNode("n2", "h100", 2)};
  std::map<std::string, GpuCounts> c = CountGpusByType(
      Nodes(nodes), Pods({inference, worker("w-0", "Running"), worker("w-1", "Pending"), stopping,
                          worker("w-3", "Succeeded")}));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c["a100"].inference, 1);
  EXPECT_EQ(c["a100"].training, 3);
  EXPECT_EQ(c["a100"].idle, 0);
  EXPECT_EQ(c["h100"].idle, 2);
  // Every job ended: nothing trains.
  c = CountGpusByType(Nodes(nodes), Pods({inference, worker("w-3", "Succeeded")}));
  EXPECT_EQ(c["a100"].training, 0);
  EXPECT_EQ(c["a100"].idle, 3);
}

}  // namespace
}  // namespace easyscale::op
