// Reconcile of EasyScaleJob: validate, finalize, merge worker reports, schedule,
// plan the next generation, write status, then make the worker Pods match.
#include "controller/job_controller.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "controller/generation_plan.h"
#include "controller/gpu_inventory.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"
#include "easyscale/operator/kube_time.h"

namespace easyscale::op {

using nlohmann::json;

namespace {

std::pair<std::string, std::string> SplitKey(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

bool HasFinalizer(const json& obj) {
  for (const json& f : obj["metadata"].value("finalizers", json::array())) {
    if (f == kCleanupFinalizer) return true;
  }
  return false;
}

std::vector<json> WorkerPodsOf(const json& job, const std::vector<json>& pods) {
  const std::string ns = job["metadata"].value("namespace", "");
  const std::string name = job["metadata"].value("name", "");
  const std::string uid = job["metadata"].value("uid", "");
  std::vector<json> out;
  for (const json& p : pods) {
    if (!IsWorkerPod(p) || p["metadata"].value("namespace", "") != ns ||
        p["metadata"]["labels"].value(kJobLabel, "") != name) {
      continue;
    }
    for (const json& ref : p["metadata"].value("ownerReferences", json::array())) {
      if (ref.value("uid", "") == uid && ref.value("controller", false)) out.push_back(p);
    }
  }
  return out;
}

std::map<std::string, json> ByName(std::vector<json> objects) {
  std::map<std::string, json> out;
  for (json& o : objects) {
    std::string name = o["metadata"].value("name", "");
    out.emplace(std::move(name), std::move(o));
  }
  return out;
}

int64_t RvNumber(const json& obj) {
  int64_t v = 0;
  return absl::SimpleAtoi(ResourceVersionOf(obj), &v) ? v : 0;
}

}  // namespace

JobController::JobController(KubeClient* client, EventRecorder* recorder, Metrics* metrics,
                             ControllerOptions options)
    : client_(client),
      recorder_(recorder),
      metrics_(metrics),
      options_(std::move(options)),
      scheduler_(options_.scheduler),
      jobs_(client, kEasyScaleJobs, {.ns = options_.ns}),
      pods_(client, kPods, {}),
      nodes_(client, kNodes, {}),
      queue_(BackoffOptions{std::chrono::milliseconds(50), std::chrono::seconds(30)}) {
  auto enqueueJob = [this](const json& j) { queue_.Add(ObjectKey(j)); };
  jobs_.AddHandlers({.onAdd = enqueueJob,
                     .onUpdate = [enqueueJob](const json&, const json& j) { enqueueJob(j); },
                     .onDelete = enqueueJob});
  auto onPod = [this](const json& p) {
    if (IsWorkerPod(p)) {
      const json& m = p["metadata"];
      queue_.Add(m.value("namespace", "") + "/" + m["labels"].value(kJobLabel, ""));
    } else if (IsInferencePod(p)) {
      EnqueueAllJobs();  // GPUs were claimed or released
    }
  };
  pods_.AddHandlers({.onAdd = onPod,
                     .onUpdate = [onPod](const json&, const json& p) { onPod(p); },
                     .onDelete = onPod});
  nodes_.AddHandlers({.onAdd = [this](const json&) { EnqueueAllJobs(); },
                      .onUpdate =
                          [this](const json& old, const json& now) {
                            if (NodeGpusByType(old) != NodeGpusByType(now)) EnqueueAllJobs();
                          },
                      .onDelete = [this](const json&) { EnqueueAllJobs(); }});
  // The GPU gauges describe the cluster, not a job's reconcile: read from the
  // caches at each scrape, they stay right when no job runs. Only the acting
  // replica (the leader) shows them, as dashboards sum over the replicas.
  metrics_->SetGpuSource([this] {
    return acting_ && HasSynced() ? CountGpusByType(nodes_.List(), pods_.List())
                                  : std::map<std::string, GpuCounts>();
  });
}

JobController::~JobController() {
  metrics_->SetGpuSource(nullptr);
  Stop();
}

void JobController::StartInformers() {
  jobs_.Start();
  pods_.Start();
  nodes_.Start();
}

bool JobController::HasSynced() const {
  return jobs_.HasSynced() && pods_.HasSynced() && nodes_.HasSynced();
}

void JobController::StartWorker() {
  if (worker_.joinable()) return;
  acting_ = true;
  EnqueueAllJobs();
  worker_ = std::thread([this] { WorkerLoop(); });
  resync_ = std::thread([this] { ResyncLoop(); });
}

void JobController::Stop() {
  stopped_ = true;
  queue_.ShutDown();
  if (worker_.joinable()) worker_.join();
  if (resync_.joinable()) resync_.join();
  jobs_.Stop();
  pods_.Stop();
  nodes_.Stop();
}

void JobController::EnqueueAllJobs() {
  for (const json& j : jobs_.List()) queue_.Add(ObjectKey(j));
}

void JobController::ResyncLoop() {
  while (!stopped_) {
    const auto until = std::chrono::steady_clock::now() + options_.resyncPeriod;
    while (!stopped_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!stopped_) EnqueueAllJobs();
  }
}

void JobController::WorkerLoop() {
  while (std::optional<std::string> key = queue_.Get()) {
    const auto start = std::chrono::steady_clock::now();
    Status s;
    try {
      s = Reconcile(*key);
    } catch (const std::exception& e) {  // a bug or an object we misread: never crash
      s = absl::InternalError(e.what());
    }
    metrics_->ObserveReconcile(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (s.ok()) {
      queue_.Forget(*key);
    } else if (IsRetryable(s) || absl::IsUnknown(s) || absl::IsNotFound(s) ||
               absl::IsAlreadyExists(s)) {
      LogWarn("controller", "reconcile failed; requeued",
              {{"job", *key}, {"error", s.ToString()}, {"requeues", queue_.NumRequeues(*key)}});
      queue_.AddRateLimited(*key);
    } else {
      LogError("controller", "reconcile failed; dropped", {{"job", *key}, {"error", s.ToString()}});
      queue_.Forget(*key);
    }
    queue_.Done(*key);
  }
}

json JobController::Freshest(const std::string& key, const json& cached) {
  std::lock_guard<std::mutex> lock(writtenMu_);
  auto it = written_.find(key);
  if (it == written_.end()) return cached;
  if (RvNumber(it->second) > RvNumber(cached) &&
      it->second["metadata"].value("uid", "") == cached["metadata"].value("uid", "")) {
    return it->second;
  }
  written_.erase(it);
  return cached;
}

void JobController::Remember(const json& job) {
  std::lock_guard<std::mutex> lock(writtenMu_);
  written_[ObjectKey(job)] = job;
}

Status JobController::Reconcile(const std::string& key) {
  std::optional<json> cached = jobs_.Get(key);
  if (!cached) {  // deleted: the garbage collector removes its pods
    book_.Forget(key);
    metrics_->ForgetJob(key);
    std::lock_guard<std::mutex> lock(writtenMu_);
    written_.erase(key);
    return absl::OkStatus();
  }
  json job = Freshest(key, *cached);
  if (job["metadata"].contains("deletionTimestamp")) return Finalize(job);
  if (!HasFinalizer(job)) {
    ES_ASSIGN_OR_RETURN(job, UpdateWithRetry(*client_, kEasyScaleJobs, job, [](json& o) {
                          if (!HasFinalizer(o))
                            o["metadata"]["finalizers"].push_back(kCleanupFinalizer);
                        }));
    Remember(job);
  }
  const int64_t generation = job["metadata"].value("generation", int64_t{1});
  StatusOr<JobStatus> parsed = ParseJobStatus(job.value("status", json()));
  if (!parsed.ok()) {
    LogWarn("controller", "unreadable status; starting over",
            {{"job", key}, {"error", parsed.status().ToString()}});
  }
  JobStatus st = parsed.ok() ? *parsed : JobStatus{};
  StatusOr<JobSpec> spec = ParseJobSpec(job.value("spec", json()), "spec");
  if (!spec.ok()) return FailInvalid(job, st, spec.status());
  if (spec->maxWorkers == 0) spec->maxWorkers = spec->ests;

  const json* failed = FindCondition(st.conditions, "Failed");
  if (st.phase == "Failed" && failed != nullptr && failed->value("reason", "") == "Invalid" &&
      st.observedGeneration < generation) {  // the spec was fixed: start again
    st.phase = "Pending";
    SetCondition(st.conditions, "Failed", false, "Valid", "the spec is valid", generation);
  }
  const std::map<std::string, json> pods = ByName(WorkerPodsOf(job, pods_.List()));
  if (st.phase == "Succeeded" || st.phase == "Failed") {
    return SyncPods(job, *spec, st, pods, /*keepNone=*/true);
  }

  JobStatus next = st;
  next.observedGeneration = generation;
  MergeReports(key, &next, job);
  if (next.phase == "Succeeded") {
    ES_ASSIGN_OR_RETURN(json written, WriteStatus(job, next));
    recorder_->Normal(
        written, "Succeeded",
        absl::StrCat("training finished at step ", next.step, "; digest ", next.digest));
    book_.Forget(key);
    return SyncPods(written, *spec, next, pods, /*keepNone=*/true);
  }
  DropLostWorkers(job, pods, &next);

  size_t self = 0;
  const ClusterState cluster = BuildCluster(key, next, &self);
  const auto t0 = std::chrono::steady_clock::now();
  const ScheduleResult result = scheduler_.Schedule(cluster);
  metrics_->ObserveSchedule(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  ES_CHECK(self < result.allocations.size()) << "the scheduler dropped a job";
  int preempted = 0;
  for (const Preemption& p : result.preemptions) {
    if (p.job == key) preempted += p.workers;
  }
  ES_ASSIGN_OR_RETURN(PlanChange change,
                      PlanNextGeneration(job["metadata"].value("name", ""), *spec,
                                         result.allocations[self].placements, preempted, NowTime(),
                                         options_.scheduler, &next));
  ReleaseIfDrained(&next);
  next.phase = PhaseOf(next);
  SetCondition(next.conditions, "Running", next.phase == "Running", next.phase,
               absl::StrCat(next.workers.size(), " workers in generation ", next.generation),
               generation);

  ES_ASSIGN_OR_RETURN(json written, WriteStatus(job, next));
  PublishPlan(key, *spec, next);
  metrics_->SetJobStep(key, next.step);
  const Status synced = SyncPods(written, *spec, next, pods, /*keepNone=*/false);
  if (change.changed) {  // after the pods: an Event must not delay a GPU's use
    metrics_->AddScaleEvent();
    if (preempted > 0) metrics_->AddPreemptions(preempted);
    if (change.reason == "Preempted") {
      recorder_->Warning(written, change.reason, change.message);
    } else {
      recorder_->Normal(written, change.reason, change.message);
    }
  }
  ES_RETURN_IF_ERROR(synced);

  // Other jobs whose allocation changed apply it in their own reconcile.
  for (size_t i = 0; i < result.allocations.size(); ++i) {
    if (i != self && CountPlacements(result.allocations[i].placements) !=
                         CountPlacements(cluster.jobs[i].current)) {
      queue_.Add(cluster.jobs[i].key);
    }
  }
  if (!next.draining.empty()) queue_.AddAfter(key, std::chrono::milliseconds(500));
  return absl::OkStatus();
}

Status JobController::Finalize(const json& job) {
  // From the API server, not the cache: a pod created just before the deletion
  // may not have reached the informer yet, and the finalizer must wait for it.
  const std::string ns = job["metadata"].value("namespace", "");
  StatusOr<json> listed = client_->List(
      kPods, ns,
      {.labelSelector = absl::StrCat(kJobLabel, "=", job["metadata"].value("name", ""))});
  if (!listed.ok()) return listed.status();
  const json& items = (*listed)["items"];
  if (!items.is_array()) return absl::InternalError("pod list: items is not an array");
  const std::vector<json> pods = WorkerPodsOf(job, items.get<std::vector<json>>());
  for (const json& p : pods) {
    if (p["metadata"].contains("deletionTimestamp")) continue;  // already terminating
    Status s = client_->Delete(kPods, ns, p["metadata"].value("name", ""));
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  book_.Forget(ObjectKey(job));
  if (!HasFinalizer(job)) return absl::OkStatus();
  if (!pods.empty()) {
    // The job goes when its pods have: until then they may still be training
    // on their GPUs (and writing to its checkpoint directory).
    queue_.AddAfter(ObjectKey(job), std::chrono::milliseconds(500));
    LogInfo("controller", "finalizing: waiting for worker pods",
            {{"job", ObjectKey(job)}, {"pods", static_cast<int64_t>(pods.size())}});
    return absl::OkStatus();
  }
  StatusOr<json> out = UpdateWithRetry(*client_, kEasyScaleJobs, job, [](json& o) {
    json kept = json::array();
    for (const json& f : o["metadata"].value("finalizers", json::array())) {
      if (f != kCleanupFinalizer) kept.push_back(f);
    }
    o["metadata"]["finalizers"] = kept;
  });
  if (!out.ok() && !absl::IsNotFound(out.status())) return out.status();
  LogInfo("controller", "finalized", {{"job", ObjectKey(job)}});
  return absl::OkStatus();
}

Status JobController::FailInvalid(const json& job, JobStatus st, const Status& why) {
  const int64_t generation = job["metadata"].value("generation", int64_t{1});
  const std::string message(why.message());
  const json* c = FindCondition(st.conditions, "Failed");
  if (st.phase == "Failed" && c != nullptr && c->value("reason", "") == "Invalid" &&
      c->value("message", "") == message && st.observedGeneration == generation) {
    return absl::OkStatus();  // already reported; a bad spec is not retried
  }
  st.phase = "Failed";
  st.observedGeneration = generation;
  SetCondition(st.conditions, "Failed", true, "Invalid", message, generation);
  SetCondition(st.conditions, "Running", false, "Failed", message, generation);
  StatusOr<json> written = WriteStatus(job, st);
  if (!written.ok()) return written.status();
  recorder_->Warning(*written, "Failed", "Invalid spec: " + message);
  book_.Forget(ObjectKey(job));
  const std::map<std::string, json> pods = ByName(WorkerPodsOf(job, pods_.List()));
  return SyncPods(*written, JobSpec{}, st, pods, /*keepNone=*/true);
}

void JobController::MergeReports(const std::string& key, JobStatus* st, const json& job) {
  const std::map<std::string, WorkerReport> reports = book_.Reports(key);
  auto newest = [&](const std::string& pod) -> std::optional<WorkerReport> {
    auto it = reports.find(pod);
    return it == reports.end() ? std::nullopt : std::optional<WorkerReport>(it->second);
  };
  std::erase_if(st->draining,
                [&](const DrainingRecord& d) { return DrainedBy(d, newest(d.worker.pod)); });
  std::map<std::string, std::pair<double, int>> speed;  // type -> sum, count
  for (const WorkerRecord& w : st->workers) {
    std::optional<WorkerReport> r = newest(w.pod);
    if (!r) continue;
    st->step = std::max(st->step, r->step);
    if (r->state == WorkerState::kRunning && r->generation == st->generation &&
        r->samplesPerSecond > 0 && !w.ests.empty()) {
      // The mean reported rate of this type's workers in the newest generation.
      auto& [sum, n] = speed[w.gpuType];
      sum += r->samplesPerSecond;
      ++n;
    }
    if (r->state == WorkerState::kSucceeded && !r->digest.empty() && st->phase != "Succeeded") {
      st->phase = "Succeeded";
      st->digest = r->digest;
      st->testAccuracy = r->testAccuracy;
      st->completionTime = NowTime();
      SetCondition(st->conditions, "Succeeded", true, "Completed", "digest " + r->digest,
                   job["metadata"].value("generation", int64_t{1}));
      SetCondition(st->conditions, "Running", false, "Succeeded", "training finished",
                   job["metadata"].value("generation", int64_t{1}));
    }
  }
  for (const auto& [type, sn] : speed) st->speed[type] = sn.first / sn.second;
}

void JobController::DropLostWorkers(const json& job, const std::map<std::string, json>& pods,
                                    JobStatus* st) {
  const auto now = WallClock::now();
  std::erase_if(st->draining, [&](const DrainingRecord& d) {
    auto it = pods.find(d.worker.pod);
    if (it == pods.end() || PodTerminated(it->second)) return true;  // gone: nothing to wait for
    StatusOr<WallClock::time_point> since = ParseTime(d.since);
    if (since.ok() && now - *since > options_.drainTimeout) {
      recorder_->Warning(job, "DrainTimeout",
                         absl::StrCat("worker ", d.worker.pod, " did not checkpoint generation ",
                                      d.generation, " in time"));
      return true;
    }
    return false;
  });
  std::erase_if(st->workers, [&](const WorkerRecord& w) {
    auto it = pods.find(w.pod);
    if (it == pods.end() || !PodTerminated(it->second)) return false;  // missing = to create
    recorder_->Warning(
        job, "WorkerLost",
        absl::StrCat("worker pod ", w.pod, " on ", w.node, " ended: ",
                     it->second.value("status", json::object()).value("phase", "deleted")));
    return true;
  });
}

StatusOr<json> JobController::WriteStatus(const json& job, const JobStatus& st) {
  const json wanted = ToJson(st);
  if (job.value("status", json()) == wanted) return job;
  ES_ASSIGN_OR_RETURN(json written, UpdateStatusWithRetry(*client_, kEasyScaleJobs, job,
                                                          [&](json& o) { o["status"] = wanted; }));
  Remember(written);
  return written;
}

void JobController::PublishPlan(const std::string& key, const JobSpec& spec, const JobStatus& st) {
  ControlPlan p;
  p.job = key;
  p.generation = st.generation;
  p.runningGeneration = st.runningGeneration;
  p.totalEsts = spec.ests;
  p.workers = st.workers;
  p.draining = st.draining;
  const auto [ns, name] = SplitKey(key);
  p.checkpointDir = spec.checkpoint.mountPath + "/" + ns + "/" + name;
  p.backend = options_.workerBackend;
  p.training = spec.training;
  book_.Publish(std::move(p));
}

Status JobController::SyncPods(const json& job, const JobSpec& spec, const JobStatus& st,
                               const std::map<std::string, json>& pods, bool keepNone) {
  std::set<std::string> members;
  if (!keepNone) {
    for (const WorkerRecord& w : st.workers) members.insert(w.pod);
    for (const DrainingRecord& d : st.draining) members.insert(d.worker.pod);
    for (const WorkerRecord& w : st.workers) {
      if (pods.count(w.pod) != 0) continue;
      const json pod = BuildWorkerPod(job, spec, w, st.generation, options_.pod);
      StatusOr<json> created = client_->Create(kPods, job["metadata"].value("namespace", ""), pod);
      if (!created.ok()) {
        if (absl::IsAlreadyExists(created.status())) continue;  // the cache lags our own create
        return created.status();
      }
      LogInfo("controller", "worker pod created",
              {{"pod", w.pod},
               {"node", w.node},
               {"gpuType", w.gpuType},
               {"generation", st.generation}});
    }
  }
  for (const auto& [name, pod] : pods) {
    if (members.count(name) != 0 || pod["metadata"].contains("deletionTimestamp")) continue;
    Status s = client_->Delete(kPods, pod["metadata"].value("namespace", ""), name);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
    LogInfo("controller", "worker pod deleted", {{"pod", name}});
  }
  return absl::OkStatus();
}

}  // namespace easyscale::op
