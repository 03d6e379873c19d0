// The controller in-process against the test API server: invalid specs, the
// life of a job through releases, preemption, draining and completion, and
// finalizer clean-up. Workers are played by reports into the control book.
#include "controller/job_controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <thread>

#include "test_apiserver.h"
#include "testing/object_store.h"
#include "testing/test_util.h"

namespace easyscale::op {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::Eventually;

const json kGoodSpec = {{"image", "easyscale/worker:1"},
                        {"ests", 8},
                        {"minWorkers", 1},
                        {"maxWorkers", 4},
                        {"checkpoint", {{"mountPath", "/ckpt"}}}};

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
  void TearDown() override {
    controller_->Stop();
    // Every Event any test made has a CamelCase reason, as kubectl users expect.
    StatusOr<json> events = client_->List(kEvents, "default", {});
    ASSERT_TRUE(events.ok()) << events.status();
    for (const json& e : (*events)["items"]) {
      const std::string reason = e.value("reason", "");
      EXPECT_TRUE(std::regex_match(reason, std::regex("[A-Z][a-z0-9]+([A-Z][a-z0-9]*)*")))
          << "reason \"" << reason << "\": " << e.value("message", "");
    }
  }

  json Get(const std::string& name) {
    StatusOr<json> j = client_->Get(kEasyScaleJobs, "default", name);
    return j.ok() ? *j : json();
  }
  json StatusOf(const std::string& name) { return Get(name).value("status", json::object()); }
  // What the device plugin publishes on `node`: its GPUs and their holders.
  bool PublishGpus(const std::string& node, const json& gpus) {
    return client_
        ->MergePatch(kNodes, "", node,
                     {{"metadata", {{"annotations", {{"easyscale.io/gpus", gpus.dump()}}}}}})
        .ok();
  }
  // A metric sample's value, or -1 while it is not exported.
  double Sample(const std::string& series) {
    const std::string text = metrics_.Text();
    const size_t at = text.find("\n" + series + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size() + 2));
  }
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
    // The status is written before the plan naming the pod is published: wait
    // for its assignment, as a worker does (its report is refused until then).
    ASSERT_TRUE(Eventually([&] { return controller_->book().AssignmentFor(r.job, pod).ok(); }))
        << pod;
    StatusOr<bool> news = controller_->book().Record(r);
    ASSERT_TRUE(news.ok()) << news.status();
    if (*news) controller_->queue().Add(r.job);
  }
  // The kubelet's word that `pod`'s container ended (phase Succeeded or Failed).
  void EndPod(const std::string& pod, const std::string& phase, int exitCode,
              const std::string& reason) {
    ASSERT_TRUE(
        client_
            ->MergePatch(
                kPods, "default", pod,
                {{"status",
                  {{"phase", phase},
                   {"containerStatuses",
                    {{{"name", "worker"},
                      {"state",
                       {{"terminated", {{"exitCode", exitCode}, {"reason", reason}}}}}}}}}}},
                true)
            .ok());
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
  // The pod's assignment once it says Run (or the last one seen): the plan is
  // published right after the status write that released its generation.
  StatusOr<WorkerAssignment> RunAssignment(const std::string& pod) {
    StatusOr<WorkerAssignment> a;
    Eventually([&] {
      a = Assignment(pod);
      return a.ok() && a->action == WorkerAction::kRun;
    });
    return a;
  }
  std::vector<std::string> Pods(const json& records) {
    std::vector<std::string> out;
    for (const json& w : records) out.push_back(w["pod"]);
    return out;
  }
  // The condition of `type` in the job's status; null when it has none.
  json Condition(const std::string& name, const std::string& type) {
    const json conditions = StatusOf(name).value("conditions", json::array());
    const json* c = FindCondition(conditions, type);
    return c == nullptr ? json() : *c;
  }
  // Job j (kGoodSpec) running on n1's one a100; returns its worker's pod.
  std::string RunOneWorkerJob() {
    EXPECT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 1)).ok());
    EXPECT_TRUE(
        client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", kGoodSpec)).ok());
    EXPECT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Running"; }));
    const json workers = StatusOf("j").value("workers", json::array());
    return workers.empty() ? "" : workers[0].value("pod", "");
  }
  // Job j's two workers on n1 lose it to inference while n3 is idle: the
  // new workers (gen2) run and the drained old ones (gen1) serve them the state.
  void HandOverToNewWorkers(std::vector<std::string>* gen1, std::vector<std::string>* gen2) {
    ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
    json spec = kGoodSpec;
    spec["maxWorkers"] = 2;  // n3 coming up is no reason to scale out
    ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());
    ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Running"; }));
    *gen1 = Pods(StatusOf("j")["workers"]);
    for (const std::string& p : *gen1) Report(p, 1, WorkerState::kRunning, 7);
    ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n3", "a100", 2)).ok());
    RunInference("inf-1", "n1", 2);  // n1 is inference's again; n3 is idle
    ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("generation", 0) == 2; }));
    *gen2 = Pods(StatusOf("j")["workers"]);
    for (const std::string& p : *gen2) EXPECT_EQ(std::count(gen1->begin(), gen1->end(), p), 0);
    for (const std::string& p : *gen1) Report(p, 1, WorkerState::kCheckpointed, 9);
    ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("runningGeneration", 0) == 2; }));
    EXPECT_EQ(Pods(StatusOf("j")["handover"]), *gen1);
  }
  void SetSuspend(const std::string& name, bool suspend) {
    ASSERT_TRUE(
        client_->MergePatch(kEasyScaleJobs, "default", name, {{"spec", {{"suspend", suspend}}}})
            .ok());
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
  // Counted once each, however often they are reconciled.
  EXPECT_EQ(Sample(R"(easyscale_jobs_created_total{namespace="default"})"), bad.size() + 1.0);
  EXPECT_EQ(Sample(R"(easyscale_jobs_failed_total{namespace="default"})"), bad.size());
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
  StatusOr<WorkerAssignment> a = RunAssignment(gen1[0]);
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
  a = RunAssignment(gen2.back());
  ASSERT_TRUE(a.ok());
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
  EXPECT_EQ(Sample(R"(easyscale_jobs_created_total{namespace="default"})"), 1.0);
  EXPECT_EQ(Sample(R"(easyscale_jobs_succeeded_total{namespace="default"})"), 1.0);
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
  StatusOr<WorkerAssignment> a = RunAssignment(pod);
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
  EXPECT_EQ(Sample(R"(easyscale_jobs_created_total{namespace="default"})"), 1.0);
  EXPECT_EQ(Sample(R"(easyscale_jobs_restarted_total{namespace="default"})"), 2.0);
  EXPECT_EQ(Sample(R"(easyscale_jobs_failed_total{namespace="default"})"), 1.0);
  EXPECT_EQ(Sample(R"(easyscale_jobs_succeeded_total{namespace="default"})"), -1.0);
}

TEST_F(JobControllerTest, APermanentWorkerErrorFailsTheJobAtOnce) {
  const std::string pod = RunOneWorkerJob();
  ASSERT_FALSE(pod.empty());
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
  std::vector<std::string> gen1, gen2;
  ASSERT_NO_FATAL_FAILURE(HandOverToNewWorkers(&gen1, &gen2));
  StatusOr<WorkerAssignment> a = RunAssignment(gen2[0]);
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
  const std::string pod = RunOneWorkerJob();
  ASSERT_FALSE(pod.empty());
  Report(pod, 1, WorkerState::kRunning, 30);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("step", 0) == 30; }));
  EndPod(pod, "Failed", 137, "OOMKilled");
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
  // Restarting goes True with the failure, then False once the new worker trains.
  const json restarting = Condition("j", "Restarting");
  EXPECT_EQ(restarting["status"], "True");
  EXPECT_EQ(restarting["reason"], "WorkerLost");
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("runningGeneration", 0) == 2; }));
  Report(Pods(StatusOf("j")["workers"])[0], 2, WorkerState::kRunning, 1);
  ASSERT_TRUE(Eventually([&] { return Condition("j", "Restarting")["status"] == "False"; }));
  EXPECT_EQ(Condition("j", "Restarting")["reason"], "Recovered");
  EXPECT_EQ(Condition("j", "Running")["status"], "True");
}

// A kubelet that has no free GPU for a worker pod rejects it (Failed,
// OutOfeasyscale.io/gpu, no container started): no training failed, so the
// pod is made again and the job counts no restart.
TEST_F(JobControllerTest, AWorkerPodTheKubeletRejectedIsMadeAgainWithoutARestart) {
  const std::string pod = RunOneWorkerJob();
  ASSERT_FALSE(pod.empty());
  // The status names the pod just before the pod is made.
  ASSERT_TRUE(Eventually([&] { return client_->Get(kPods, "default", pod).ok(); }));
  const StatusOr<json> rejected = client_->Get(kPods, "default", pod);
  ASSERT_TRUE(rejected.ok());
  ASSERT_TRUE(client_
                  ->MergePatch(kPods, "default", pod,
                               {{"status",
                                 {{"phase", "Failed"},
                                  {"reason", "OutOfeasyscale.io/gpu"},
                                  {"message",
                                   "Pod was rejected: Node didn't have enough resource: "
                                   "easyscale.io/gpu, requested: 1, used: 1, capacity: 1"}}}},
                               true)
                  .ok());
  ASSERT_TRUE(Eventually([&] { return EventCount("j", "WorkerNotAdmitted") >= 1; }));
  ASSERT_TRUE(Eventually([&] {  // the same name, a new pod
    StatusOr<json> p = client_->Get(kPods, "default", pod);
    return p.ok() && (*p)["metadata"]["uid"] != (*rejected)["metadata"]["uid"] &&
           (*p)["status"].value("phase", "Pending") == "Pending";
  }));
  const json st = StatusOf("j");
  EXPECT_EQ(st.value("restarts", 0), 0);  // omitted while 0
  EXPECT_EQ(st.value("generation", 0), 1);
  EXPECT_EQ(EventCount("j", "WorkerLost"), 0);
}

// A worker pod bound to a node whose GPUs all have pods (here another job's
// worker there: the one a cycle moved still drains) is not made until one is
// free: a real kubelet would reject it.
TEST_F(JobControllerTest, AWorkerPodWaitsForAFreeGpuOnItsNode) {
  const std::string pod = RunOneWorkerJob();
  ASSERT_FALSE(pod.empty());
  const json other = {{"metadata",
                       {{"name", "other-worker"},
                        {"labels", {{"easyscale.io/role", "worker"}, {"easyscale.io/job", "k"}}}}},
                      {"spec",
                       {{"nodeName", "n1"},
                        {"containers", {{{"name", "worker"}, {"image", "easyscale/worker"}}}}}}};
  ASSERT_TRUE(Eventually([&] { return client_->Get(kPods, "default", pod).ok(); }));
  ASSERT_TRUE(client_->Create(kPods, "default", other).ok());
  std::this_thread::sleep_for(300ms);                           // the operator's cache has it
  ASSERT_TRUE(client_->Delete(kPods, "default", pod, 0).ok());  // as a kubelet ends it
  // The job's pod is missing; its node's one GPU is the other worker's.
  std::this_thread::sleep_for(1s);
  EXPECT_FALSE(client_->Get(kPods, "default", pod).ok());
  ASSERT_TRUE(client_->Delete(kPods, "default", "other-worker", 0).ok());
  EXPECT_TRUE(Eventually([&] { return client_->Get(kPods, "default", pod).ok(); }));
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

// A rank other than 0 reports success without the digest and its pod ends
// (exit 0) while rank 0 still evaluates: no worker was lost, nothing restarts,
// and the job succeeds with rank 0's digest.
TEST_F(JobControllerTest, AWorkerThatFinishedBeforeRankZeroIsNotLost) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  ASSERT_TRUE(
      client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", kGoodSpec)).ok());
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").size() == 2; }));
  for (const json& p : WorkerPods("j")) {
    ASSERT_TRUE(client_
                    ->MergePatch(kPods, "default", p["metadata"]["name"],
                                 {{"status", {{"phase", "Running"}}}}, true)
                    .ok());
  }
  const std::vector<std::string> workers = Pods(StatusOf("j")["workers"]);
  ASSERT_EQ(workers.size(), 2u);
  Report(workers[0], 1, WorkerState::kRunning, 50);
  Report(workers[1], 1, WorkerState::kSucceeded, 50);  // no digest: not rank 0
  EndPod(workers[1], "Succeeded", 0, "Completed");
  std::this_thread::sleep_for(1s);  // syncs that would count the ended pod
  EXPECT_EQ(EventCount("j", "WorkerLost"), 0);
  EXPECT_EQ(StatusOf("j").value("restarts", 0), 0);
  EXPECT_EQ(StatusOf("j").value("generation", 0), 1);
  Report(workers[0], 1, WorkerState::kSucceeded, 50, std::string(64, 'a'));
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Succeeded"; }));
  EXPECT_EQ(StatusOf("j").value("restarts", 0), 0);
  EXPECT_EQ(EventCount("j", "WorkerLost"), 0);
}

// A job forced onto a faster and a slower GPU: the slower one computes the
// whole step, the faster one waits part of it. Its allocated and useful GPUs
// per type are exported, and they vanish when the job ends.
TEST_F(JobControllerTest, UsefulGpuGaugesShowTheShareOfEachStepAJobComputes) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 1)).ok());
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n2", "h100", 1)).ok());
  json spec = kGoodSpec;
  spec["minWorkers"] = 2;
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").size() == 2; }));
  const std::string job = "job=\"default/j\"";
  ASSERT_TRUE(Eventually([&] {
    return Sample("easyscale_job_allocated_gpus{gpu_type=\"a100\"," + job + "}") == 1.0;
  })) << metrics_.Text();
  EXPECT_EQ(Sample("easyscale_job_allocated_gpus{gpu_type=\"h100\"," + job + "}"), 1.0);
  // Default speeds a100 2.5, h100 3.5: 8 ESTs split 3 / 5, a step of 5/3.5;
  // the a100 computes 3/2.5 of it.
  const double a100 = 3 / 2.5 / (5 / 3.5);
  EXPECT_NEAR(Sample("easyscale_job_useful_gpus{gpu_type=\"a100\"," + job + "}"), a100, 1e-9);
  EXPECT_NEAR(Sample("easyscale_job_useful_gpus{gpu_type=\"h100\"," + job + "}"), 1.0, 1e-9);
  EXPECT_NEAR(Sample("easyscale_useful_gpus{gpu_type=\"a100\"}"), a100, 1e-9);

  Report(Pods(StatusOf("j")["workers"])[0], 1, WorkerState::kSucceeded, 50, std::string(64, 'a'));
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Succeeded"; }));
  EXPECT_TRUE(Eventually([&] {
    return metrics_.Text().find("easyscale_useful_gpus{") == std::string::npos &&
           Sample("easyscale_job_allocated_gpus{gpu_type=\"a100\"," + job + "}") == -1.0;
  })) << metrics_.Text();
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

// spec.suspend on a job that never ran: it simply waits, with no pods, and
// says so; the conditions follow it through its life.
TEST_F(JobControllerTest, ASuspendedJobCreatesNoPodsAndWaits) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  json spec = kGoodSpec;
  spec["suspend"] = true;
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Suspended"; }));
  std::this_thread::sleep_for(600ms);  // several resyncs and cycles
  EXPECT_TRUE(WorkerPods("j").empty());
  EXPECT_EQ(StatusOf("j")["phase"], "Suspended");
  EXPECT_TRUE(StatusOf("j").value("workers", json::array()).empty());
  const json created = Condition("j", "Created");
  EXPECT_EQ(created["status"], "True");
  EXPECT_EQ(created["reason"], "Created");
  EXPECT_EQ(Condition("j", "Suspended")["status"], "True");
  EXPECT_EQ(Condition("j", "Suspended")["reason"], "Suspended");
  EXPECT_EQ(Condition("j", "Running")["status"], "False");
  EXPECT_EQ(Condition("j", "Running")["reason"], "Suspended");
  EXPECT_EQ(EventCount("j", "Suspended"), 1);
  EXPECT_EQ(StatusOf("j")["progressPercentage"], 0);
  // It asks the scheduler for nothing: a job created after it gets every GPU.
  json other = kGoodSpec;
  other["maxWorkers"] = 2;
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("k", other)).ok());
  ASSERT_TRUE(Eventually([&] { return WorkerPods("k").size() == 2; }));

  // Resumed on a new node: scheduled like a new job. Created keeps its first transition.
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n2", "a100", 2)).ok());
  SetSuspend("j", false);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Running"; }));
  EXPECT_TRUE(Eventually([&] { return WorkerPods("j").size() == 2; }));
  EXPECT_EQ(Condition("j", "Running")["status"], "True");
  EXPECT_EQ(Condition("j", "Suspended")["status"], "False");
  EXPECT_EQ(Condition("j", "Suspended")["reason"], "Resumed");
  EXPECT_EQ(Condition("j", "Created")["lastTransitionTime"], created["lastTransitionTime"]);
  EXPECT_TRUE(Eventually([&] { return EventCount("j", "Resumed") == 1; }));
  EXPECT_TRUE(Eventually([&] { return EventCount("j", "Scheduled") == 1; }));
  EXPECT_EQ(StatusOf("j")["restore"]["from"], "Fresh");

  // To the end: Running turns False with the reason, Succeeded True.
  const std::vector<std::string> pods = Pods(StatusOf("j")["workers"]);
  Report(pods[0], 1, WorkerState::kSucceeded, 120, std::string(64, 'a'));
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Succeeded"; }));
  EXPECT_EQ(Condition("j", "Succeeded")["status"], "True");
  EXPECT_EQ(Condition("j", "Running")["status"], "False");
  EXPECT_EQ(Condition("j", "Running")["reason"], "Succeeded");
  EXPECT_EQ(StatusOf("j")["progressPercentage"], 100);
  EXPECT_FALSE(StatusOf("j").contains("estimatedRemainingSeconds"));
}

// A running job with a claim is suspended: its workers checkpoint at the next
// step (the drain a scale-in uses), then their pods are deleted and its GPUs
// are free; resumed, the new workers restore that checkpoint.
TEST_F(JobControllerTest, SuspendDrainsARunningJobThenDeletesItsPodsAndResumes) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  json spec = kGoodSpec;
  spec["checkpoint"]["claimName"] = "ckpt";
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Running"; }));
  const std::vector<std::string> gen1 = Pods(StatusOf("j")["workers"]);
  ASSERT_EQ(gen1.size(), 2u);
  for (const std::string& p : gen1) Report(p, 1, WorkerState::kRunning, 5);

  SetSuspend("j", true);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("generation", 0) == 2; }));
  json st = StatusOf("j");
  EXPECT_TRUE(st.value("workers", json::array()).empty());
  EXPECT_EQ(Pods(st["draining"]), gen1);
  EXPECT_EQ(st["phase"], "Suspended");
  EXPECT_NE(Condition("j", "Suspended")["message"].get<std::string>().find("checkpoint"),
            std::string::npos);
  // The pods stay until they have checkpointed.
  ASSERT_TRUE(Eventually([&] {
    StatusOr<WorkerAssignment> a = Assignment(gen1[0]);
    return a.ok() && a->action == WorkerAction::kCheckpointAndStop;
  }));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(WorkerPods("j").size(), 2u);
  for (const std::string& p : gen1) Report(p, 1, WorkerState::kCheckpointed, 10);
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").empty(); }));
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("draining", json::array()).empty(); }));
  st = StatusOf("j");
  EXPECT_EQ(st["step"], 10);
  EXPECT_EQ(st["progressPercentage"], 8);  // 10 of 120 steps
  EXPECT_FALSE(st.contains("estimatedRemainingSeconds"));
  EXPECT_NE(Condition("j", "Suspended")["message"].get<std::string>().find("claim ckpt"),
            std::string::npos)
      << Condition("j", "Suspended");
  EXPECT_EQ(EventCount("j", "Suspended"), 1);
  EXPECT_EQ(EventCount("j", "ScaledIn"), 0);
  // No cycle gives the suspended job a GPU (the kubelet confirms the pods' end).
  for (const std::string& p : gen1) ASSERT_TRUE(client_->Delete(kPods, "default", p, 0).ok());
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(StatusOf("j").value("workers", json::array()).empty());
  EXPECT_EQ(StatusOf("j")["generation"], 2);

  SetSuspend("j", false);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("runningGeneration", 0) == 3; }));
  st = StatusOf("j");
  EXPECT_EQ(st["phase"], "Running");
  EXPECT_EQ(st["restore"]["from"], "Durable");
  EXPECT_EQ(st["step"], 10);
  EXPECT_EQ(Condition("j", "Suspended")["reason"], "Resumed");
  EXPECT_TRUE(Eventually([&] { return WorkerPods("j").size() == 2; }));
  StatusOr<WorkerAssignment> a = RunAssignment(Pods(st["workers"])[0]);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->action, WorkerAction::kRun);
  EXPECT_EQ(a->restore.from, RestoreFrom::kDurable);
  EXPECT_FALSE(a->checkpointDir.empty());
  EXPECT_EQ(EventCount("j", "StateLost"), 0);
  EXPECT_TRUE(Eventually([&] { return EventCount("j", "Resumed") == 1; }));
}

// Without a claim nothing keeps the state of a suspended job: it resumes
// from step 0 and a Warning Event says so.
TEST_F(JobControllerTest, SuspendWithoutAClaimResumesFromStepZeroAndSaysSo) {
  const std::string pod = RunOneWorkerJob();
  ASSERT_FALSE(pod.empty());
  SetSuspend("j", true);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("generation", 0) == 2; }));
  Report(pod, 1, WorkerState::kCheckpointed, 30);
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").empty(); }));
  ASSERT_TRUE(Eventually([&] {
    return Condition("j", "Suspended")["message"].get<std::string>().find("starts over") !=
           std::string::npos;
  })) << Condition("j", "Suspended");
  ASSERT_TRUE(client_->Delete(kPods, "default", pod, 0).ok());
  SetSuspend("j", false);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("runningGeneration", 0) == 3; }));
  EXPECT_EQ(StatusOf("j")["restore"]["from"], "Fresh");
  EXPECT_EQ(StatusOf("j")["step"], 0);
  EXPECT_TRUE(Eventually([&] { return EventCount("j", "StateLost") == 1; }));
}

// Suspended during a hand-over: once the running workers have drained,
// nothing is left to serve the state to, and the serving workers go too.
TEST_F(JobControllerTest, ASuspensionDuringAHandOverLetsEveryWorkerGo) {
  std::vector<std::string> gen1, gen2;
  ASSERT_NO_FATAL_FAILURE(HandOverToNewWorkers(&gen1, &gen2));
  SetSuspend("j", true);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("generation", 0) == 3; }));
  EXPECT_EQ(WorkerPods("j").size(), 4u);  // gen2 drains, gen1 still serves it
  for (const std::string& p : gen2) Report(p, 2, WorkerState::kCheckpointed, 12);
  ASSERT_TRUE(Eventually([&] { return WorkerPods("j").empty(); }));
  const json st = StatusOf("j");
  EXPECT_TRUE(st.value("handover", json::array()).empty());
  EXPECT_EQ(st["step"], 12);
  EXPECT_EQ(st["phase"], "Suspended");
}

// Kueue admits custom jobs through spec.suspend: one created suspended with
// the queue label waits, saying why, until Kueue flips suspend.
TEST_F(JobControllerTest, AJobQueuedInKueueWaitsForAdmission) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  json spec = kGoodSpec;
  spec["suspend"] = true;
  json job = testing::EasyScaleJob("j", spec);
  job["metadata"]["labels"] = {{kQueueNameLabel, "team-a"}};
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", job).ok());
  ASSERT_TRUE(Eventually([&] { return Condition("j", "Suspended").is_object(); }));
  json c = Condition("j", "Suspended");
  EXPECT_EQ(c["status"], "True");
  EXPECT_EQ(c["reason"], "WaitingForAdmission");
  EXPECT_NE(c["message"].get<std::string>().find("team-a"), std::string::npos) << c;
  EXPECT_EQ(StatusOf("j")["phase"], "Suspended");
  std::this_thread::sleep_for(600ms);
  EXPECT_TRUE(WorkerPods("j").empty());
  EXPECT_EQ(EventCount("j", "WaitingForAdmission"), 1);

  SetSuspend("j", false);  // Kueue admits it
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Running"; }));
  EXPECT_TRUE(Eventually([&] { return WorkerPods("j").size() == 2; }));
  c = Condition("j", "Suspended");
  EXPECT_EQ(c["status"], "False");
  EXPECT_EQ(c["reason"], "Admitted");
  EXPECT_NE(c["message"].get<std::string>().find("team-a"), std::string::npos) << c;
  EXPECT_TRUE(Eventually([&] { return EventCount("j", "Admitted") == 1; }));
}

// progressPercentage follows the step; the estimate appears once a rate is
// measured and goes when the job ends.
TEST_F(JobControllerTest, StatusShowsProgressAndTheTimeLeft) {
  const std::string pod = RunOneWorkerJob();
  ASSERT_FALSE(pod.empty());
  EXPECT_FALSE(StatusOf("j").contains("estimatedRemainingSeconds"));
  Report(pod, 1, WorkerState::kRunning, 12);
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("progressPercentage", 0) == 10; }));
  std::this_thread::sleep_for(1200ms);
  Report(pod, 1, WorkerState::kRunning, 60);
  ASSERT_TRUE(Eventually([&] {
    const json st = StatusOf("j");
    return st.value("progressPercentage", 0) == 50 && st.contains("estimatedRemainingSeconds");
  }));
  // 60 steps in at most the few seconds this test has run: 60 more take as long.
  const int64_t eta = StatusOf("j")["estimatedRemainingSeconds"];
  EXPECT_GE(eta, 1);
  EXPECT_LE(eta, 60);
  Report(pod, 1, WorkerState::kSucceeded, 120, std::string(64, 'a'));
  ASSERT_TRUE(Eventually([&] { return StatusOf("j").value("phase", "") == "Succeeded"; }));
  EXPECT_EQ(StatusOf("j")["progressPercentage"], 100);
  EXPECT_FALSE(StatusOf("j").contains("estimatedRemainingSeconds"));
}

// The test drives the controller's worker by hand: nothing reconciles or
// schedules unless the test calls it.
class JobControllerStepTest : public JobControllerTest {
 protected:
  JobControllerStepTest() { startWorker_ = false; }

  // Runs scheduling cycles until one plans `placements` for job j (the node
  // cache may not have the latest change yet).
  bool CyclePlans(const std::vector<Placement>& placements) {
    return Eventually([&] {
      controller_->RunSchedulingCycle();
      const std::optional<JobPlan> plan = controller_->cycle().PlanFor("default/j");
      return plan && plan->placements == placements;
    });
  }
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

// On a real node the NVIDIA plugin, which knows nothing of our workers, may
// give an inference pod the GPU rank 0 runs on. The device plugin says which
// (heldBy and trainingPod on one GPU): that worker is the one preempted.
TEST_F(JobControllerStepTest, TheWorkerOnTheGpuInferenceWasGivenIsPreempted) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  json spec = kGoodSpec;
  spec["maxWorkers"] = 2;
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return controller_->CachedJob("default/j") != nullptr; }));
  ASSERT_TRUE(CyclePlans({{"n1", "a100", 2}}));
  ASSERT_TRUE(controller_->Reconcile("default/j").ok());
  const std::vector<std::string> gen1 = Pods(StatusOf("j")["workers"]);
  ASSERT_EQ(gen1.size(), 2u);

  ASSERT_TRUE(PublishGpus(
      "n1", json::array({{{"id", "0"},
                          {"type", "a100"},
                          {"heldBy", "serving/llm-0"},
                          {"trainingPod", "default/" + gen1[0]}},
                         {{"id", "1"}, {"type", "a100"}, {"trainingPod", "default/" + gen1[1]}}})));
  ASSERT_TRUE(CyclePlans({{"n1", "a100", 1}}));
  ASSERT_TRUE(controller_->Reconcile("default/j").ok());
  const json st = StatusOf("j");
  EXPECT_EQ(Pods(st["workers"]), std::vector<std::string>{gen1[1]});
  EXPECT_EQ(Pods(st["draining"]), gen1);  // both checkpoint; rank 0's GPU goes to inference
  EXPECT_EQ(st.value("preemptions", 0), 1);
}

// The pod informer lags the pods the controller just created: a worker of the
// running generation that the cache has not seen is not gone, so the next
// generation drains it (its state kept) instead of dropping it.
TEST_F(JobControllerStepTest, AWorkerTheCacheHasNotSeenIsDrainedNotDropped) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  json spec = kGoodSpec;
  spec["maxWorkers"] = 2;
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return controller_->CachedJob("default/j") != nullptr; }));
  server_->HoldWatches("pods", true);
  ASSERT_TRUE(CyclePlans({{"n1", "a100", 2}}));  // once the node cache has n1
  ASSERT_TRUE(controller_->Reconcile("default/j").ok());
  ASSERT_EQ(WorkerPods("j").size(), 2u);
  ASSERT_EQ(StatusOf("j").value("runningGeneration", 0), 1);
  const std::vector<std::string> gen1 = Pods(StatusOf("j")["workers"]);
  ASSERT_EQ(controller_->CachedPod("default/" + gen1[0]), nullptr);

  // Inference takes n1 back (the device plugin says so; no pod event needed)
  // and n3 comes up: the job moves there.
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n3", "a100", 2)).ok());
  ASSERT_TRUE(PublishGpus(
      "n1", json::array({{{"id", "0"}, {"type", "a100"}, {"heldBy", "serving/llm-0"}},
                         {{"id", "1"}, {"type", "a100"}, {"heldBy", "serving/llm-0"}}})));
  ASSERT_TRUE(CyclePlans({{"n3", "a100", 2}}));
  ASSERT_TRUE(controller_->Reconcile("default/j").ok());
  ASSERT_TRUE(controller_->Reconcile("default/j").ok());  // it looks for the leaving pods
  const json st = StatusOf("j");
  EXPECT_EQ(st.value("generation", 0), 2);
  EXPECT_EQ(Pods(st["draining"]), gen1);
  EXPECT_EQ(WorkerPods("j").size(), 4u);
  server_->HoldWatches("pods", false);
}

// A long window and no resync: every cycle comes from a change.
class JobControllerWindowTest : public JobControllerTest {
 protected:
  JobControllerWindowTest() {
    scheduleWindow_ = 2s;
    resyncPeriod_ = 600s;
  }
};

// Inference is given the GPU of the job's only worker while the node's other
// GPU is idle: the job's placement stays (one worker on n1), and no resync
// comes, yet the cycle that sees the node sends the job to reconcile, which
// puts a new worker in the displaced one's place.
TEST_F(JobControllerWindowTest, ADisplacedWorkerIsReplacedThoughThePlanStays) {
  ASSERT_TRUE(client_->Create(kNodes, "", testing::GpuNode("n1", "a100", 2)).ok());
  json spec = kGoodSpec;
  spec["maxWorkers"] = 1;
  ASSERT_TRUE(client_->Create(kEasyScaleJobs, "default", testing::EasyScaleJob("j", spec)).ok());
  ASSERT_TRUE(Eventually([&] { return Pods(StatusOf("j")["workers"]).size() == 1; }, 10s));
  const std::string first = Pods(StatusOf("j")["workers"])[0];
  ASSERT_TRUE(PublishGpus("n1", json::array({{{"id", "0"},
                                              {"type", "a100"},
                                              {"heldBy", "serving/llm-0"},
                                              {"trainingPod", "default/" + first}},
                                             {{"id", "1"}, {"type", "a100"}}})));
  ASSERT_TRUE(Eventually(
      [&] {
        const std::vector<std::string> now = Pods(StatusOf("j")["workers"]);
        return now.size() == 1 && now[0] != first;
      },
      10s))
      << StatusOf("j");
  EXPECT_EQ(StatusOf("j").value("preemptions", 0), 1);
}

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
