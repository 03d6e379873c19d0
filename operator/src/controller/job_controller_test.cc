// The controller in-process against the test API server: invalid specs, the
// life of a job through releases, preemption, draining and completion, and
// finalizer clean-up. Workers are played by reports into the control book.
#include "controller/job_controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "test_apiserver.h"
#include "testing/object_store.h"
#include "testing/test_util.h"

namespace easyscale::op {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::Eventually;

class JobControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Strict: a status field the operator writes and the CRD lacks fails the write.
    auto s =
        testing::TestApiServer::Start({.bookmarkIntervalMs = 200, .strictFieldValidation = true});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    auto c = KubeClient::Create(server_->ClientConfig());
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    recorder_ = std::make_unique<EventRecorder>(client_.get(), "easyscale-operator", "test");
    ControllerOptions o;
    o.pod.controlUrl = "http://127.0.0.1:9";
    o.workerBackend = "cpu";
    o.resyncPeriod = resyncPeriod_;
    o.scheduleWindow = scheduleWindow_;
    o.maxRestartBackoff = 300ms;
    controller_ = std::make_unique<JobController>(client_.get(), recorder_.get(), &metrics_,
                                                  ControlTokens::Random(), o);
    controller_->StartInformers();
    ASSERT_TRUE(Eventually([&] { return controller_->HasSynced(); }));
    if (startWorker_) controller_->StartWorker();
  }
  void TearDown() override { controller_->Stop(); }

  json Get(const std::string& name) {
    StatusOr<json> j = client_->Get(kEasyScaleJobs, "default", name);
    return j.ok() ? *j : json();
  }
  json StatusOf(const std::string& name) { return Get(name).value("status", json::object()); }
  int EventCount(const std::string& name, const std::string& reason) {
    StatusOr<json> e = client_->List(
        kEvents, "default", {.fieldSelector = "involvedObject.name=" + name + ",reason=" + reason});
    return e.ok() ? static_cast<int>((*e)["items"].size()) : -1;
  }
  // Worker pods not terminating (no kubelet here confirms the deletions).
  std::vector<json> WorkerPods(const std::string& job) {
    StatusOr<json> l =
        client_->List(kPods, "default", {.labelSelector = "easyscale.io/job=" + job});
    std::vector<json> out;
    if (!l.ok()) return out;
    for (const json& p : (*l)["items"]) {
      if (!p["metadata"].contains("deletionTimestamp")) out.push_back(p);
    }
    return out;
  }
  // A worker's report; a stopped worker holds the job's state at `step`.
  void Report(const std::string& pod, int64_t generation, WorkerState state, int64_t step = 0,
              const std::string& digest = "", const std::string& reason = "",
              const OutputDigests& output = {}) {
    WorkerReport r{.job = "default/j",
                   .pod = pod,
                   .generation = generation,
                   .state = state,
                   .step = step,
                   .digest = digest,
                   .output = output,
                   .reason = reason};
    if (state == WorkerState::kCheckpointed || state == WorkerState::kFailed) {
      r.stateStep = step;
      r.stateUrl = "http://" + pod + ":29400";
    }
    // The status says Running before the plan is published: wait for it, as
    // a worker's report would (it is refused until then).
    ASSERT_TRUE(Eventually([&] { return controller_->book().HasPlan(r.job); }));
    StatusOr<bool> news = controller_->book().Record(r);
    ASSERT_TRUE(news.ok()) << news.status();
    if (*news) controller_->queue().Add(r.job);
  }
  // Places inference on every GPU of `node` and waits until the controller sees it.
  void RunInference(const std::string& name, const std::string& node, int gpus) {
    ASSERT_TRUE(client_->Create(kPods, "default", testing::InferencePod(name, node, gpus)).ok());
    ASSERT_TRUE(
        client_->MergePatch(kPods, "default", name, {{"status", {{"phase", "Running"}}}}, true)
            .ok());
    ASSERT_TRUE(Eventually([&] {
      const PodPtr pod = controller_->CachedPod("default/" + name);
      return pod && pod->phase == PodPhase::kRunning;
    }));
  }
  StatusOr<WorkerAssignment> Assignment(const std::string& pod) {
    return controller_->book().AssignmentFor("default/j", pod);
  }
  std::vector<std::string> Pods(const json& records) {
    std::vector<std::string> out;
    for (const json& w : records) out.push_back(w["pod"]);
    return out;
  }

  std::chrono::milliseconds resyncPeriod_ = 200ms;
  std::chrono::milliseconds scheduleWindow_ = 100ms;
  bool startWorker_ = true;
  std::unique_ptr<testing::TestApiServer> server_;
  std::unique_ptr<KubeClient> client_;
  Metrics metrics_;
  std::unique_ptr<EventRecorder> recorder_;
  std::unique_ptr<JobController> controller_;
};

const json kGoodSpec = {{"image", "easyscale/worker:1"},
                        {"ests", 8},
                        {"minWorkers", 1},
                        {"maxWorkers", 4},
                        {"checkpoint", {{"mountPath", "/ckpt"}}}};

TEST_F(JobControllerTest, InvalidSpecsGetFailedInvalidConditionAndEvent) {
  // The CRD refuses these specs; they reach the operator as jobs stored under
  // an older, looser CRD would.
  server_->store().SetValidateJobSpecs(false);
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  const std::vector<std::pair<std::string, json>> bad = {
      {"no-ests", {{"image", "x"}, {"ests", 0}}},
      {"min-over-max", {{"image", "x"}, {"ests", 4}, {"minWorkers", 3}, {"maxWorkers", 2}}},
      {"bad-type", {{"image", "x"}, {"ests", 4}, {"gpuTypes", {"quantum"}}}},
      {"no-image", {{"ests", 4}}},
      // A model file no worker pod mounts: refused before any pod is made.
      {"model-outside-volumes",
       {{"image", "x"},
        {"ests", 4},
        {"training", {{"model", "file"}, {"modelFile", "/opt/r18.onnx"}}}}}};
  for (const auto& [name, spec] : bad) {
    ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob(name, spec)).ok());
  }
  for (const auto& [name, spec] : bad) {
    ASSERT_TRUE(Eventually([&] { return StatusOf(name).value("phase", "") == "Failed"; })) << name;
    const json st = StatusOf(name);
    const json* c = FindCondition(st["conditions"], "Failed");
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ((*c)["reason"], "Invalid");
    EXPECT_EQ((*c)["status"], "True");
    EXPECT_NE((*c)["message"].get<std::string>().find("spec."), std::string::npos) << *c;
    ASSERT_TRUE(Eventually([&] { return EventCount(name, "Failed") == 1; })) << name;
    EXPECT_TRUE(WorkerPods(name).empty());
  }
  const json outside_status = StatusOf("model-outside-volumes");
  const json* outside = FindCondition(outside_status["conditions"], "Failed");
  ASSERT_NE(outside, nullptr);
  EXPECT_EQ((*outside)["message"].get<std::string>().rfind(
                "spec.training.modelFile: \"/opt/r18.onnx\" is in none of the job's volumes", 0),
            0u)
      << *outside;
  // The controller lives on: a good job next to them is scheduled.
  ASSERT_TRUE(
      client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("good", kGoodSpec)).ok());
  ASSERT_TRUE(Eventually([&] { return StatusOf("good").value("phase", "") == "Running"; }));
  std::this_thread::sleep_for(500ms);  // several resyncs: no repeated Events for bad specs
  EXPECT_EQ(EventCount("no-ests", "Failed"), 1);
}

TEST_F(JobControllerTest, ScalesOutOnReleasePreemptsForInferenceAndFinishes) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n2", "h100", 2)).ok());
  ASSERT_TRUE(client_->Create(kPods, "default", testing::InferencePod("inf-1", "n1", 2)).ok());
  ASSERT_TRUE(
      client_->MergePatch(kPods, "default", "inf-1", {{"status", {{"phase", "Running"}}}}, true)
          .ok());
  // Informers deliver independently: without this wait the job can be placed on
  // n1 before the controller sees inf-1 holding it (then it is preempted at once).
  ASSERT_TRUE(Eventually([&] {
    const PodPtr pod = controller_->CachedPod("default/inf-1");
    return pod && pod->phase == PodPhase::kRunning;
  }));
  json spec = kGoodSpec;
  spec["output"] = {{"path", "/models/j"}};
  spec["worker"]["volumes"] = {
      {{"name", "models"}, {"claimName", "models"}, {"mountPath", "/models"}}};
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());

  // Only n2's h100s are idle: two workers, released at once (nothing to drain).
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Running"; }));
  json st = StatusOf("j");
  ASSERT_EQ(st["workers"].size(), 2u);
  EXPECT_EQ(st["generation"], 1);
  for (const json& w : st["workers"]) EXPECT_EQ(w["node"], "n2");
  EXPECT_EQ(st["assignment"]["totalEsts"], 8);
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").size() == 2; }));
  const json pod = WorkerPods("j")[0];
  EXPECT_EQ(pod["spec"]["nodeName"], "n2");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(pod["metadata"]["labels"]["easyscale.io/role"], "worker");
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["easyscale.io/gpu"], "1");
  // The Event is recorded after the pods are created: wait for it.
  EXPECT_TRUE(Eventually([&] { return EventCount("j", "Scheduled") == 1; }));
  const std::vector<std::string> gen1 = Pods(st["workers"]);
  StatusOr<WorkerAssignment> a = Assignment(gen1[0]);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->action, WorkerAction::kRun);
  EXPECT_EQ(a->rendezvous.prefix.rfind("gen-1-", 0), 0u) << a->rendezvous.prefix;
  EXPECT_EQ(a->rendezvous.url, "http://127.0.0.1:9");
  EXPECT_EQ(a->restore.from, RestoreFrom::kFresh);
  EXPECT_EQ(a->checkpointDir, "");                          // no claim: no durable checkpoint
  EXPECT_EQ(a->output, (OutputSpec{.path = "/models/j"}));  // rank 0 writes the model there
  const json* durable = FindCondition(st["conditions"], "DurableCheckpoint");
  ASSERT_NE(durable, nullptr);
  EXPECT_EQ((*durable)["status"], "False");
  EXPECT_EQ((*durable)["reason"], "NoClaim");
  for (const std::string& p : gen1) Report(p, 1, WorkerState::kRunning, 5);

  // Inference leaves n1: while its pod terminates it still holds the GPUs; once
  // the kubelet confirms (a grace-0 delete), scale out to 4; generation 2 waits
  // for gen 1 to checkpoint.
  ASSERT_TRUE(client_->Delete(kPods, "default", "inf-1").ok());
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(StatusOf("j").value("generation", 0), 1);
  ASSERT_TRUE(client_->Delete(kPods, "default", "inf-1", 0).ok());
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("generation", 0) == 2; }));
  st = StatusOf("j");
  EXPECT_EQ(st["phase"], "Scaling");
  EXPECT_EQ(st["workers"].size(), 4u);
  EXPECT_EQ(st["draining"].size(), 2u);
  ASSERT_TRUE(Eventually([&] { return EventCount("j", "ScaledOut") == 1; }));
  std::vector<std::string> gen2 = Pods(st["workers"]);
  a = Assignment(gen2.back());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->action, WorkerAction::kWait);
  EXPECT_EQ(a->generation, 2);
  for (const std::string& p : gen1) Report(p, 1, WorkerState::kCheckpointed, 10);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("runningGeneration", 0) == 2; }));
  EXPECT_EQ(StatusOf("j")["phase"], "Running");
  a = Assignment(gen2.back());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->action, WorkerAction::kRun);
  EXPECT_EQ(a->worldSize, 4);
  // The new workers take the state from the two that stay, which hold step 10.
  EXPECT_EQ(a->restore.from, RestoreFrom::kPeers);
  EXPECT_EQ(a->restore.step, 10);
  ASSERT_EQ(a->restore.sources.size(), 2u);
  EXPECT_EQ(a->restore.sources[0].url, "http://" + a->restore.sources[0].pod + ":29400");

  // Inference comes back to n1 for one GPU: one a100 worker is preempted.
  ASSERT_TRUE(client_->Create(kPods, "default", testing::InferencePod("inf-2", "n1", 1)).ok());
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("generation", 0) == 3; }));
  st = StatusOf("j");
  EXPECT_EQ(st["workers"].size(), 3u);
  EXPECT_GE(st["preemptions"].get<int>(), 1);
  ASSERT_TRUE(Eventually([&] { return EventCount("j", "Preempted") == 1; }));
  const std::vector<std::string> gen3 = Pods(st["workers"]);
  std::string removed;
  for (const std::string& p : gen2) {
    if (std::find(gen3.begin(), gen3.end(), p) == gen3.end()) removed = p;
  }
  ASSERT_FALSE(removed.empty());
  ASSERT_TRUE(Eventually([&] {  // the plan is published right after the status write
    a = Assignment(removed);
    return a.ok() && a->action == WorkerAction::kCheckpointAndStop;
  }));
  EXPECT_EQ(a->generation, 2);
  for (const std::string& p : gen2) Report(p, 2, WorkerState::kCheckpointed, 20);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("runningGeneration", 0) == 3; }));
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").size() == 3; }));  // the GPU is freed
  EXPECT_TRUE(Eventually([&] { return absl::IsNotFound(Assignment(removed).status()); }));
  // The kubelet starts the inference pod on the freed GPU.
  ASSERT_TRUE(
      client_->MergePatch(kPods, "default", "inf-2", {{"status", {{"phase", "Running"}}}}, true)
          .ok());
  ASSERT_TRUE(Eventually([&] {
    return metrics_.Text().find("easyscale_gpus{gpu_type=\"a100\",state=\"inference\"} 1") !=
           std::string::npos;
  }));
  EXPECT_EQ(StatusOf("j")["generation"], 3);  // no churn once inference runs

  // Rank 0 finishes: Succeeded with the digest; the pods go away.
  for (const std::string& p : gen3) Report(p, 3, WorkerState::kRunning, 30);
  Report(gen3[0], 3, WorkerState::kSucceeded, 120, std::string(64, 'a'), "",
         {.path = "/models/j", .safetensorsSha256 = std::string(64, 'b')});
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Succeeded"; }));
  EXPECT_EQ(StatusOf("j")["digest"], std::string(64, 'a'));
  EXPECT_EQ(StatusOf("j")["output"],
            json({{"path", "/models/j"}, {"safetensorsSha256", std::string(64, 'b')}}));
  EXPECT_EQ(StatusOf("j")["step"], 120);
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").empty(); }));
  EXPECT_EQ(EventCount("j", "Succeeded"), 1);
  const std::string text = metrics_.Text();
  EXPECT_NE(text.find("easyscale_preemptions_total 1"), std::string::npos) << text;
  EXPECT_NE(text.find("easyscale_scale_events_total 3"), std::string::npos) << text;
}

// Every job gets its control token in a Secret its pods read, and a
// NetworkPolicy under which its workers take traffic only from each other.
TEST_F(JobControllerTest, JobsGetTheirTokenSecretAndNetworkPolicy) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 1)).ok());
  ASSERT_TRUE(
      client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", kGoodSpec)).ok());
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").size() == 1; }));
  const json job = Get("j");
  const std::string secret = ControlSecretName("j", job["metadata"]["uid"]);
  StatusOr<json> s = client_->Get(kSecrets, "default", secret);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)["metadata"]["ownerReferences"][0]["uid"], job["metadata"]["uid"]);
  EXPECT_EQ((*s)["data"]["token"].get<std::string>().size(), 88u);  // base64 of 64 hex
  const json env = WorkerPods("j")[0]["spec"]["containers"][0]["env"];
  bool mounted = false;
  for (const json& e : env) {
    if (e["name"] == "EASYSCALE_CONTROL_TOKEN") {
      mounted = e["valueFrom"]["secretKeyRef"]["name"] == secret;
    }
  }
  EXPECT_TRUE(mounted) << env.dump();
  StatusOr<json> policy = client_->Get(kNetworkPolicies, "default", "j-workers");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ((*policy)["spec"]["podSelector"]["matchLabels"]["easyscale.io/job"], "j");
  EXPECT_EQ((*policy)["spec"]["ingress"][0]["from"][0]["podSelector"],
            (*policy)["spec"]["podSelector"]);
}

// Rank 0's certificates reach status.certificate, the job's history ConfigMap
// (owned by the job) and the gauge; one the job did not ask for, or that
// contradicts the history, is refused and kept out.
TEST_F(JobControllerTest, CertificatesReachTheStatusTheHistoryAndTheGauge) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 1)).ok());
  json spec = kGoodSpec;
  spec["training"] = {{"steps", 100}};
  spec["certificate"] = {{"everySteps", 20}};
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Running"; }));
  const std::string pod = StatusOf("j")["workers"][0]["pod"];
  StatusOr<WorkerAssignment> a = Assignment(pod);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->certificateEvery, 20) << "the workers are told the spec's interval";
  const std::string d20(64, 'a'), d40(64, 'b');
  auto report = [&](int64_t step, const Certificate& c) {
    WorkerReport r{.job = "default/j",
                   .pod = pod,
                   .generation = 1,
                   .state = WorkerState::kRunning,
                   .step = step,
                   .certificate = c};
    StatusOr<bool> news = controller_->book().Record(r);
    if (news.ok() && *news) controller_->queue().Add(r.job);
    return news.status();
  };
  ASSERT_TRUE(report(20, {20, d20}).ok());
  ASSERT_TRUE(report(21, {20, d20}).ok());  // repeated until the next: stored once
  ASSERT_TRUE(report(40, {40, d40}).ok());
  ASSERT_TRUE(Eventually([&] { return StatusOf("j")["certificate"]["step"] == 40; }))
      << StatusOf("j");
  EXPECT_EQ(StatusOf("j")["certificate"]["digest"], d40);
  StatusOr<json> cm = client_->Get(kConfigMaps, "default", "j-certificate");
  ASSERT_TRUE(cm.ok()) << cm.status();
  EXPECT_EQ((*cm)["data"]["certificates"],
            "certificate step=20 digest=" + d20 + "\ncertificate step=40 digest=" + d40 + "\n");
  EXPECT_EQ((*cm)["metadata"]["ownerReferences"][0]["uid"], Get("j")["metadata"]["uid"]);
  EXPECT_NE(metrics_.Text().find("easyscale_job_certified_step{job=\"default/j\"} 40\n"),
            std::string::npos);

  const std::pair<Certificate, const char*> refused[] = {
      {{30, std::string(64, 'c')}, "certificate.step: 30: not a multiple of"},
      {{120, std::string(64, 'c')}, "certificate.step: 120: past the job's last step (100)"},
      {{40, std::string(64, 'c')}, "certificate.digest: step 40 was certified with digest"},
  };
  for (const auto& [c, want] : refused) {
    const Status s = report(41, c);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(std::string(s.message()).find(want), std::string::npos) << s.message();
  }
  EXPECT_TRUE(controller_->book().PendingCertificates("default/j").empty());
  EXPECT_EQ(controller_->book().Reports("default/j").at(pod).step, 40) << "refused: not kept";
  std::this_thread::sleep_for(500ms);  // resyncs: nothing else reaches the history
  cm = client_->Get(kConfigMaps, "default", "j-certificate");
  ASSERT_TRUE(cm.ok());
  const std::string lines = (*cm)["data"]["certificates"];
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 2) << lines;
}

// A worker that says it cannot go on (here: it could not reach its peers)
// makes the job restart its generation, with the reason in a condition and an
// Event; past the backoff limit the job is Failed, never looping on.
TEST_F(JobControllerTest, WorkerFailuresRestartWithBackoffThenFailTheJob) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  json spec = kGoodSpec;
  spec["runPolicy"] = {{"backoffLimit", 2}};
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());
  for (int64_t generation = 1; generation <= 3; ++generation) {
    ASSERT_TRUE(Eventually(
        [&] {
          const json st = StatusOf("j");
          return st.value("runningGeneration", 0) == generation;
        },
        10s))
        << generation;
    const std::vector<std::string> pods = Pods(StatusOf("j")["workers"]);
    ASSERT_EQ(pods.size(), 2u);
    Report(pods[0], generation, WorkerState::kRunning, 4);
    Report(pods[1], generation, WorkerState::kFailed, 4, "", "RendezvousFailed");
    if (generation == 3) break;
    ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("restarts", 0) == generation; }));
    const json st = StatusOf("j");
    const json* c = FindCondition(st["conditions"], "Restarting");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ((*c)["status"], "True");
    EXPECT_EQ((*c)["reason"], "RendezvousFailed");
    EXPECT_EQ(st["phase"], "Scaling");
    // The same pods go on in a new generation; both stopped the old one.
    Report(pods[0], generation, WorkerState::kCheckpointed, 4, "", "PeerLost");
  }
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Failed"; }));
  const json st = StatusOf("j");
  EXPECT_EQ(st["restarts"], 3);
  const json* c = FindCondition(st["conditions"], "Failed");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["reason"], "BackoffLimitExceeded");
  EXPECT_NE((*c)["message"].get<std::string>().find("RendezvousFailed"), std::string::npos) << *c;
  EXPECT_TRUE(Eventually([&] { return EventCount("j", "WorkerFailed") == 3; }));
  EXPECT_TRUE(Eventually([&] { return WorkerPods("j").empty(); }));
}

TEST_F(JobControllerTest, APermanentWorkerErrorFailsTheJobAtOnce) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 1)).ok());
  ASSERT_TRUE(
      client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", kGoodSpec)).ok());
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Running"; }));
  const std::string pod = Pods(StatusOf("j")["workers"])[0];
  Report(pod, 1, WorkerState::kFailed, 0, "", kPermanentErrorReason);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Failed"; }));
  const json st = StatusOf("j");
  const json* c = FindCondition(st["conditions"], "Failed");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["reason"], "WorkerFailed");
  EXPECT_EQ(st["restarts"], 1);
}

// Inference takes every GPU the job holds while others are idle: the new
// workers hold none of the state, so the leaving ones stay, drained, to serve
// it until the new generation has restored it; then their GPUs are freed.
TEST_F(JobControllerTest, LeavingWorkersServeTheStateWhenNoWorkerStays) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  json spec = kGoodSpec;
  spec["maxWorkers"] = 2;  // n3 coming up is no reason to scale out
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Running"; }));
  const std::vector<std::string> gen1 = Pods(StatusOf("j")["workers"]);
  for (const std::string& p : gen1) Report(p, 1, WorkerState::kRunning, 7);
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n3", "a100", 2)).ok());
  RunInference("inf-1", "n1", 2);  // n1 is inference's again; n3 is idle
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("generation", 0) == 2; }));
  const std::vector<std::string> gen2 = Pods(StatusOf("j")["workers"]);
  for (const std::string& p : gen2) EXPECT_EQ(std::count(gen1.begin(), gen1.end(), p), 0);
  for (const std::string& p : gen1) Report(p, 1, WorkerState::kCheckpointed, 9);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("runningGeneration", 0) == 2; }));
  json st = StatusOf("j");
  EXPECT_EQ(Pods(st["handover"]), gen1);
  StatusOr<WorkerAssignment> a = Assignment(gen2[0]);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->restore.from, RestoreFrom::kPeers);
  EXPECT_EQ(a->restore.step, 9);
  ASSERT_EQ(a->restore.sources.size(), 2u);
  a = Assignment(gen1[0]);  // a leaving worker stays, stopped, serving
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->action, WorkerAction::kCheckpointAndStop);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(WorkerPods("j").size(), 4u);
  for (const std::string& p : gen2) Report(p, 2, WorkerState::kRunning, 10);
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").size() == 2; }));
  EXPECT_TRUE(StatusOf("j").value("handover", json::array()).empty());
}

// Every worker gone at once, no claim: the job starts over, and says so.
TEST_F(JobControllerTest, LosingEveryWorkerWithoutAClaimStartsOverAndSaysSo) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 1)).ok());
  ASSERT_TRUE(
      client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", kGoodSpec)).ok());
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Running"; }));
  const std::string pod = Pods(StatusOf("j")["workers"])[0];
  Report(pod, 1, WorkerState::kRunning, 30);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("step", 0) == 30; }));
  ASSERT_TRUE(
      client_
          ->MergePatch(
              kPods, "default", pod,
              {{"status",
                {{"phase", "Failed"},
                 {"containerStatuses",
                  {{{"name", "worker"},
                    {"state", {{"terminated", {{"exitCode", 137}, {"reason", "OOMKilled"}}}}}}}}}}},
              true)
          .ok());
  ASSERT_TRUE(Eventually([&] { return EventCount("j", "StateLost") == 1; }));
  // The event is recorded before the status write that goes with it lands.
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("restarts", 0) == 1; }));
  const json st = StatusOf("j");
  EXPECT_EQ(st["restore"]["from"], "Fresh");
  EXPECT_EQ(st["step"], 0);
  EXPECT_EQ(st["restarts"], 1);
  StatusOr<json> events = client_->List(
      kEvents, "default", {.fieldSelector = "involvedObject.name=j,reason=WorkerLost"});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ((*events)["items"].size(), 1u);
  EXPECT_NE((*events)["items"][0]["message"].get<std::string>().find("exit code 137 (OOMKilled)"),
            std::string::npos);
}

// easyscale_gpus describes the cluster, not a running job: once every job has
// ended and its pods are gone, no GPU shows as training.
TEST_F(JobControllerTest, GpuGaugesShowNoTrainingOnceEveryJobHasEnded) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  ASSERT_TRUE(
      client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", kGoodSpec)).ok());
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").size() == 2; }));
  for (const json& p : WorkerPods("j")) {  // the kubelet starts them
    ASSERT_TRUE(client_
                    ->MergePatch(kPods, "default", p["metadata"]["name"],
                                 {{"status", {{"phase", "Running"}}}}, true)
                    .ok());
  }
  auto shows = [&](const std::string& state, int gpus) {
    return Eventually([&] {
      return metrics_.Text().find("easyscale_gpus{gpu_type=\"a100\",state=\"" + state + "\"} " +
                                  std::to_string(gpus) + "\n") != std::string::npos;
    });
  };
  EXPECT_TRUE(shows("training", 2)) << metrics_.Text();
  EXPECT_TRUE(shows("idle", 0));

  const std::vector<std::string> workers = Pods(StatusOf("j")["workers"]);
  Report(workers[0], 1, WorkerState::kSucceeded, 50, std::string(64, 'a'));
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Succeeded"; }));
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").empty(); }));  // all terminating
  for (const std::string& p : workers) {  // the kubelet confirms they stopped
    ASSERT_TRUE(client_->Delete(kPods, "default", p, 0).ok());
  }
  EXPECT_TRUE(shows("training", 0)) << metrics_.Text();
  EXPECT_TRUE(shows("idle", 2)) << metrics_.Text();
}

TEST_F(JobControllerTest, DeletionRemovesTheFinalizerOnceThePodsAreGone) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  ASSERT_TRUE(
      client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", kGoodSpec)).ok());
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").size() == 2; }));
  const json job = Get("j");
  ASSERT_EQ(job["metadata"]["finalizers"][0], kCleanupFinalizer);
  ASSERT_TRUE(client_->Delete(kEasyScaleJobs, "default", "j").ok());
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").empty(); }));  // all terminating
  // No kubelet has confirmed the pods' end yet: the job keeps its finalizer.
  std::this_thread::sleep_for(1s);
  ASSERT_FALSE(Get("j").is_null());
  EXPECT_EQ(Get("j")["metadata"]["finalizers"][0], kCleanupFinalizer);
  // The kubelet's grace-0 delete after the containers stopped: then the job goes.
  StatusOr<json> pods = client_->List(kPods, "default", {.labelSelector = "easyscale.io/job=j"});
  ASSERT_TRUE(pods.ok());
  ASSERT_EQ((*pods)["items"].size(), 2u);
  for (const json& p : (*pods)["items"]) {
    ASSERT_TRUE(client_->Delete(kPods, "default", p["metadata"]["name"], 0).ok());
  }
  ASSERT_TRUE(Eventually([&] { return Get("j").is_null(); }));
}

TEST_F(JobControllerTest, DeletionWaitsForPodsTheCacheHasNotSeen) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  server_->HoldWatches("pods", true);  // the controller's pod informer lags
  ASSERT_TRUE(
      client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", kGoodSpec)).ok());
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").size() == 2; }));
  ASSERT_EQ(controller_->CachedPod("default/j-w-1-0"), nullptr);
  ASSERT_TRUE(client_->Delete(kEasyScaleJobs, "default", "j").ok());
  // The pods are found and deleted although the cache has never seen them, and
  // the finalizer stays while they terminate.
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").empty(); }));
  std::this_thread::sleep_for(1s);
  ASSERT_FALSE(Get("j").is_null());
  EXPECT_EQ(Get("j")["metadata"]["finalizers"][0], kCleanupFinalizer);
  server_->HoldWatches("pods", false);
}

// The test drives the controller's worker by hand: nothing reconciles or
// schedules unless the test calls it.
class JobControllerStepTest : public JobControllerTest {
 protected:
  JobControllerStepTest() { startWorker_ = false; }
};

TEST_F(JobControllerStepTest, AJobsReconcileAppliesTheLatestPlanAndNeverSchedules) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  ASSERT_TRUE(
      client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", kGoodSpec)).ok());
  ASSERT_TRUE(Eventually([&] { return controller_->CachedJob("default/j") != nullptr; }));

  // No plan yet: the job waits, holding nothing, and its reconciles schedule nothing.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(controller_->Reconcile("default/j").ok());
  EXPECT_EQ(controller_->cycle().cycles(), 0);
  EXPECT_EQ(StatusOf("j").value("phase", ""), "Pending");
  EXPECT_TRUE(StatusOf("j").value("workers", json::array()).empty());
  EXPECT_TRUE(WorkerPods("j").empty());

  // One cycle plans both GPUs for the job; its next reconcile applies that.
  controller_->RunSchedulingCycle();
  EXPECT_EQ(controller_->cycle().cycles(), 1);
  const std::optional<JobPlan> plan = controller_->cycle().PlanFor("default/j");
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->placements, (std::vector<Placement>{{"n1", "a100", 2}}));
  ASSERT_TRUE(controller_->Reconcile("default/j").ok());
  EXPECT_EQ(StatusOf("j")["workers"].size(), 2u);
  EXPECT_EQ(WorkerPods("j").size(), 2u);

  // Inference claims a GPU: only a cycle sees it; the job's reconciles keep
  // the old plan until one runs.
  ASSERT_TRUE(client_->Create(kPods, "default", testing::InferencePod("inf", "n1", 1)).ok());
  ASSERT_TRUE(Eventually([&] { return controller_->CachedPod("default/inf") != nullptr; }));
  ASSERT_TRUE(Eventually([&] {
    const JobPtr j = controller_->CachedJob("default/j");
    return j && j->status.ok() && j->status->workers.size() == 2;
  }));
  ASSERT_TRUE(controller_->Reconcile("default/j").ok());
  EXPECT_EQ(StatusOf("j")["workers"].size(), 2u);
  EXPECT_EQ(controller_->cycle().cycles(), 1);
  controller_->RunSchedulingCycle();
  EXPECT_EQ(controller_->cycle().PlanFor("default/j")->preempted, 1);
  ASSERT_TRUE(controller_->Reconcile("default/j").ok());
  const json st = StatusOf("j");
  EXPECT_EQ(st["workers"].size(), 1u);
  EXPECT_EQ(st.value("preemptions", 0), 1);
  EXPECT_EQ(controller_->cycle().cycles(), 2);
}

// A long window and no resync: every cycle comes from a change.
class JobControllerWindowTest : public JobControllerTest {
 protected:
  JobControllerWindowTest() {
    scheduleWindow_ = 2s;
    resyncPeriod_ = 600s;
  }
};

TEST_F(JobControllerWindowTest, ChangesWithinTheWindowAreServedByOneCycle) {
  ASSERT_TRUE(Eventually([&] { return controller_->cycle().cycles() == 1; }, 10s));  // the first
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        client_->Create(kNodes, "", testing::GpuNode("n" + std::to_string(i), "a100", 4)).ok());
  }
  const auto created = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(Eventually([&] { return controller_->cycle().cycles() >= 2; }, 10s));
  std::this_thread::sleep_for(2500ms);  // longer than a window: any second cycle would show
  if (created < 1500ms) {
    EXPECT_EQ(controller_->cycle().cycles(), 2) << "20 node changes in one window";
  } else {  // a very loaded machine: the creations spanned two windows
    EXPECT_LE(controller_->cycle().cycles(), 3);
  }
}

}  // namespace
}  // namespace easyscale::op
