// Reconcile of EasyScaleJob: validate, finalize, merge worker reports, schedule,
// plan the next generation, write status, then make the worker Pods match.
#include "controller/job_controller.h"

#include <openssl/rand.h>

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "controller/generation_plan.h"
#include "controller/gpu_inventory.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"
#include "easyscale/common/sha256.h"
#include "easyscale/operator/kube_time.h"

namespace easyscale::op {

using nlohmann::json;

namespace {

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

std::string RandomHex(int bytes) {
  std::string raw(bytes, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), bytes);
  return ToHex(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
}

std::optional<WorkerReport> Newest(const std::map<std::string, WorkerReport>& reports,
                                   const std::string& pod) {
  auto it = reports.find(pod);
  return it == reports.end() ? std::nullopt : std::optional<WorkerReport>(it->second);
}

// How a pod's container ended: "exit code N (Reason)", and whether the worker
// said retrying cannot help (its permanent-error exit code).
std::pair<std::string, bool> ContainerEnd(const json& pod) {
  const json statuses =
      pod.value("status", json::object()).value("containerStatuses", json::array());
  if (!statuses.is_array() || statuses.empty()) return {"", false};
  const json terminated =
      statuses[0].value("state", json::object()).value("terminated", json::object());
  if (!terminated.contains("exitCode") || !terminated["exitCode"].is_number_integer()) {
    return {"", false};
  }
  const int code = terminated["exitCode"].get<int>();
  const std::string reason = terminated.value("reason", "");
  return {absl::StrCat("exit code ", code, reason.empty() ? "" : " (" + reason + ")"),
          code == kPermanentExitCode};
}

int64_t PodGeneration(const json& pod) {
  int64_t g = 0;
  (void)absl::SimpleAtoi(pod["metadata"]["labels"].value(kGenerationLabel, ""), &g);
  return g;
}

}  // namespace

JobController::JobController(KubeClient* client, EventRecorder* recorder, Metrics* metrics,
                             ControlTokens tokens, ControllerOptions options)
    : client_(client),
      recorder_(recorder),
      metrics_(metrics),
      tokens_(std::move(tokens)),
      options_(std::move(options)),
      epoch_(RandomHex(4)),
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
  ES_RETURN_IF_ERROR(EnsureJobObjects(job));

  JobStatus next = st;
  next.observedGeneration = generation;
  const std::map<std::string, WorkerReport> reports = book_.Reports(key);
  MergeReports(reports, pods, &next, job);
  if (next.phase == "Succeeded") {
    ES_ASSIGN_OR_RETURN(json written, WriteStatus(job, next));
    recorder_->Normal(
        written, "Succeeded",
        absl::StrCat("training finished at step ", next.step, "; digest ", next.digest));
    book_.Forget(key);
    return SyncPods(written, *spec, next, pods, /*keepNone=*/true);
  }
  const std::vector<WorkerFailure> failures = DropLostWorkers(job, pods, reports, &next);
  const int64_t failedBefore = next.failedGeneration;
  if (RecordFailures(job, *spec, failures, &next)) {
    const WorkerFailure& last = failures.back();
    return FailJob(
        job, *spec, next, last.permanent ? "WorkerFailed" : "BackoffLimitExceeded",
        last.permanent
            ? absl::StrCat("worker ", last.pod, " failed and retrying cannot help: ", last.message)
            : absl::StrCat(next.restarts, " worker failures, more than the backoff limit ",
                           spec->runPolicy.backoffLimit, "; the last: ", last.pod, ": ",
                           last.message),
        pods);
  }
  const bool restart = next.failedGeneration != failedBefore;

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
                                         result.allocations[self].placements, preempted, restart,
                                         NowTime(), options_.scheduler, &next));
  if (ReadyToRelease(next, WallClock::now())) {
    next.runningGeneration = next.generation;
    PlanRestore(job, *spec, reports, pods, &next);
  }
  FinishHandover(job, reports, &next);
  next.phase = PhaseOf(next);
  SetCondition(next.conditions, "Running", next.phase == "Running", next.phase,
               absl::StrCat(next.workers.size(), " workers in generation ", next.generation),
               generation);
  if (spec->checkpoint.claimName.empty()) {
    SetCondition(next.conditions, "DurableCheckpoint", false, "NoClaim",
                 "no spec.checkpoint.claimName: the job survives the loss of some of its "
                 "workers (the others hold its state), not of all of them at once",
                 generation);
  } else {
    SetCondition(next.conditions, "DurableCheckpoint", true, "Claim",
                 absl::StrCat("checkpoints every ", spec->training.checkpointEvery,
                              " steps in claim ", spec->checkpoint.claimName, " at ",
                              DurableCheckpointDir(*spec, job["metadata"].value("uid", ""))),
                 generation);
  }

  ES_ASSIGN_OR_RETURN(json written, WriteStatus(job, next));
  PublishPlan(written, *spec, next);
  metrics_->SetJobStep(key, next.step);
  const Status synced = SyncPods(written, *spec, next, pods, /*keepNone=*/false);
  if (change.changed) {  // after the pods: an Event must not delay a GPU's use
    metrics_->AddScaleEvent();
    if (preempted > 0) metrics_->AddPreemptions(preempted);
    if (change.reason == "Preempted" || change.reason == "Restarted") {
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
  if (!next.draining.empty() || !next.handover.empty()) {
    queue_.AddAfter(key, std::chrono::milliseconds(500));
  }
  if (next.runningGeneration < next.generation && !next.restartAfter.empty()) {
    StatusOr<WallClock::time_point> after = ParseTime(next.restartAfter);
    if (after.ok() && *after > WallClock::now()) {
      queue_.AddAfter(
          key, std::chrono::duration_cast<std::chrono::milliseconds>(*after - WallClock::now()) +
                   std::chrono::milliseconds(50));
    }
  }
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

Status JobController::EnsureJobObjects(const json& job) {
  const std::string uid = job["metadata"].value("uid", "");
  if (ensured_.count(uid) != 0) return absl::OkStatus();
  const std::string ns = job["metadata"].value("namespace", "");
  std::vector<std::pair<const Resource*, json>> objects = {
      {&kSecrets, BuildControlSecret(job, tokens_.TokenFor(uid))}};
  if (options_.networkPolicy) objects.push_back({&kNetworkPolicies, BuildWorkerNetworkPolicy(job)});
  for (const auto& [resource, object] : objects) {
    StatusOr<json> created = client_->Create(*resource, ns, object);
    if (!created.ok() && !absl::IsAlreadyExists(created.status())) return created.status();
  }
  ensured_.insert(uid);
  return absl::OkStatus();
}

void JobController::MergeReports(const std::map<std::string, WorkerReport>& reports,
                                 const std::map<std::string, json>& pods, JobStatus* st,
                                 const json& job) {
  // A drained worker that leaves the job stays to serve the state only when no
  // worker that stays holds it (every worker of a generation holds all of it).
  const bool staying = std::any_of(st->workers.begin(), st->workers.end(), [&](const auto& w) {
    auto it = pods.find(w.pod);
    return it != pods.end() && PodGeneration(it->second) < st->generation;
  });
  std::erase_if(st->draining, [&](const DrainingRecord& d) {
    if (!DrainedBy(d, Newest(reports, d.worker.pod))) return false;
    const bool member = std::any_of(st->workers.begin(), st->workers.end(),
                                    [&](const WorkerRecord& w) { return w.pod == d.worker.pod; });
    if (!member && !staying && !st->workers.empty()) st->handover.push_back(d);
    return true;
  });
  std::map<std::string, std::pair<double, int>> speed;  // type -> sum, count
  for (const WorkerRecord& w : st->workers) {
    std::optional<WorkerReport> r = Newest(reports, w.pod);
    if (!r) continue;
    if (r->generation >= st->runningGeneration) st->step = std::max(st->step, r->step);
    // The released generation trained past what it restored: failures before
    // it no longer make the next restart wait.
    if (r->state == WorkerState::kRunning && r->generation == st->runningGeneration &&
        st->runningGeneration == st->generation && st->restore.generation == st->generation &&
        r->step > st->restore.plan.step) {
      st->failuresInARow = 0;
    }
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
      st->output = r->output;
      st->completionTime = NowTime();
      SetCondition(st->conditions, "Succeeded", true, "Completed", "digest " + r->digest,
                   job["metadata"].value("generation", int64_t{1}));
      SetCondition(st->conditions, "Running", false, "Succeeded", "training finished",
                   job["metadata"].value("generation", int64_t{1}));
    }
  }
  for (const auto& [type, sn] : speed) st->speed[type] = sn.first / sn.second;
}

std::vector<WorkerFailure> JobController::DropLostWorkers(
    const json& job, const std::map<std::string, json>& pods,
    const std::map<std::string, WorkerReport>& reports, JobStatus* st) {
  const auto now = WallClock::now();
  auto gone = [&](const std::string& pod) {
    auto it = pods.find(pod);
    return it == pods.end() || PodTerminated(it->second);
  };
  std::erase_if(st->draining, [&](const DrainingRecord& d) {
    if (gone(d.worker.pod)) return true;  // nothing to wait for
    StatusOr<WallClock::time_point> since = ParseTime(d.since);
    if (since.ok() && now - *since > options_.drainTimeout) {
      recorder_->Warning(job, "DrainTimeout",
                         absl::StrCat("worker ", d.worker.pod, " did not stop generation ",
                                      d.generation, " in time"));
      return true;
    }
    return false;
  });
  std::erase_if(st->handover, [&](const DrainingRecord& d) { return gone(d.worker.pod); });
  std::vector<WorkerFailure> failures;
  std::erase_if(st->workers, [&](const WorkerRecord& w) {
    auto it = pods.find(w.pod);
    if (it == pods.end() || !PodTerminated(it->second)) return false;  // missing = to create
    const auto [ended, permanent] = ContainerEnd(it->second);
    std::string message = absl::StrCat(
        "worker pod ", w.pod, " on ", w.node,
        " ended: ", it->second.value("status", json::object()).value("phase", "deleted"),
        ended.empty() ? "" : ", " + ended);
    if (std::optional<WorkerReport> r = Newest(reports, w.pod); r && !r->message.empty()) {
      absl::StrAppend(&message, "; it said: ", r->message);
    }
    recorder_->Warning(job, "WorkerLost", message);
    failures.push_back({w.pod, permanent ? kPermanentErrorReason : "WorkerLost", message, permanent,
                        // It failed the generation it was running, else the one it waited for.
                        PodGeneration(it->second) <= st->runningGeneration ? st->runningGeneration
                                                                           : st->generation});
    return true;
  });
  // A member of the released generation that stopped it on its own: a peer
  // was lost, the rendezvous failed, its backend broke, its input is bad.
  if (st->runningGeneration == st->generation) {
    for (const WorkerRecord& w : st->workers) {
      std::optional<WorkerReport> r = Newest(reports, w.pod);
      if (!r || r->generation != st->runningGeneration ||
          (r->state != WorkerState::kFailed && r->state != WorkerState::kCheckpointed)) {
        continue;
      }
      const bool permanent = r->reason == kPermanentErrorReason;
      const std::string reason = r->reason.empty() ? "WorkerStopped" : r->reason;
      failures.push_back({w.pod, reason,
                          absl::StrCat("worker ", w.pod, " stopped generation ", r->generation,
                                       ": ", reason, r->message.empty() ? "" : ": " + r->message),
                          permanent, r->generation});
    }
  }
  return failures;
}

bool JobController::RecordFailures(const json& job, const JobSpec& spec,
                                   const std::vector<WorkerFailure>& failures, JobStatus* st) {
  int64_t generation = 0;
  bool permanent = false;
  for (const WorkerFailure& f : failures) {
    generation = std::max(generation, f.generation);
    permanent = permanent || f.permanent;
  }
  // One failure per generation, however many of its workers say so.
  if (failures.empty() || (generation <= st->failedGeneration && !permanent)) return false;
  st->failedGeneration = std::max(st->failedGeneration, generation);
  ++st->restarts;
  const WorkerFailure& first = failures.front();
  const int64_t observed = job["metadata"].value("generation", int64_t{1});
  SetCondition(st->conditions, "Restarting", true, first.reason, first.message, observed);
  recorder_->Warning(job, "WorkerFailed",
                     absl::StrCat(first.message, " (failure ", st->restarts, " of at most ",
                                  spec.runPolicy.backoffLimit + 1, ")"));
  if (permanent || st->restarts > spec.runPolicy.backoffLimit) return true;
  ++st->failuresInARow;
  const auto delay = RestartBackoff(st->failuresInARow, options_.maxRestartBackoff);
  st->restartAfter = delay.count() > 0 ? FormatTime(WallClock::now() + delay) : "";
  return false;
}

Status JobController::FailJob(const json& job, const JobSpec& spec, JobStatus st,
                              const std::string& reason, const std::string& message,
                              const std::map<std::string, json>& pods) {
  const int64_t observed = job["metadata"].value("generation", int64_t{1});
  st.phase = "Failed";
  st.completionTime = NowTime();
  SetCondition(st.conditions, "Failed", true, reason, message, observed);
  SetCondition(st.conditions, "Running", false, reason, message, observed);
  SetCondition(st.conditions, "Restarting", false, reason, "the job failed", observed);
  ES_ASSIGN_OR_RETURN(json written, WriteStatus(job, st));
  recorder_->Warning(written, "Failed", message);
  book_.Forget(ObjectKey(job));
  return SyncPods(written, spec, st, pods, /*keepNone=*/true);
}

void JobController::PlanRestore(const json& job, const JobSpec& spec,
                                const std::map<std::string, WorkerReport>& reports,
                                const std::map<std::string, json>& pods, JobStatus* st) {
  // Workers that hold the whole job's state: those that stay first.
  std::vector<std::pair<const WorkerReport*, bool>> holders;
  for (const auto& [pod, r] : reports) {
    auto it = pods.find(pod);
    if (r.stateStep < 0 || r.stateUrl.empty() || it == pods.end() || PodTerminated(it->second)) {
      continue;
    }
    const bool member = std::any_of(st->workers.begin(), st->workers.end(),
                                    [&](const WorkerRecord& w) { return w.pod == pod; });
    holders.push_back({&r, member});
  }
  const bool anyMember =
      std::any_of(holders.begin(), holders.end(), [](const auto& h) { return h.second; });
  RestorePlan plan;
  for (const auto& [r, member] : holders) {
    if (anyMember && !member) continue;
    if (plan.sources.empty() || r->stateStep > plan.step) {
      plan.sources.clear();
      plan.step = r->stateStep;
    }
    if (r->stateStep == plan.step) plan.sources.push_back({r->pod, r->stateUrl});
  }
  if (!plan.sources.empty()) {
    plan.from = RestoreFrom::kPeers;
    st->step = plan.step;
  } else if (!spec.checkpoint.claimName.empty()) {
    plan.from = RestoreFrom::kDurable;
  } else {
    plan.from = RestoreFrom::kFresh;
    if (st->step > 0) {
      recorder_->Warning(job, "StateLost",
                         absl::StrCat("no worker holding the job's state at step ", st->step,
                                      " is left and the job has no durable checkpoint "
                                      "(spec.checkpoint.claimName): training starts over"));
    }
    st->step = 0;
  }
  st->restore = {st->generation, plan, NowTime()};
  // Only workers that serve the state stay for the hand-over.
  std::erase_if(st->handover, [&](const DrainingRecord& d) {
    return std::none_of(plan.sources.begin(), plan.sources.end(),
                        [&](const StateSource& s) { return s.pod == d.worker.pod; });
  });
}

void JobController::FinishHandover(const json& job,
                                   const std::map<std::string, WorkerReport>& reports,
                                   JobStatus* st) {
  if (st->runningGeneration < st->generation || st->workers.empty()) return;
  const bool restored = std::all_of(st->workers.begin(), st->workers.end(), [&](const auto& w) {
    std::optional<WorkerReport> r = Newest(reports, w.pod);
    return r && r->generation >= st->runningGeneration &&
           (r->state == WorkerState::kRunning || r->state == WorkerState::kCheckpointed ||
            r->state == WorkerState::kSucceeded);
  });
  const int64_t observed = job["metadata"].value("generation", int64_t{1});
  const json* restarting = FindCondition(st->conditions, "Restarting");
  if (restored && restarting != nullptr && restarting->value("status", "") == "True") {
    SetCondition(st->conditions, "Restarting", false, "Recovered",
                 absl::StrCat("generation ", st->runningGeneration, " restored step ",
                              st->restore.plan.step, " and runs"),
                 observed);
    st->restartAfter.clear();
  }
  if (st->handover.empty()) return;
  StatusOr<WallClock::time_point> since = ParseTime(st->restore.since);
  const bool late = since.ok() && WallClock::now() - *since > options_.handoverTimeout;
  if (late && !restored) {
    recorder_->Warning(job, "HandoverTimeout",
                       absl::StrCat("generation ", st->runningGeneration,
                                    " did not take the state from the leaving workers in time"));
  }
  if (restored || late) st->handover.clear();
}

StatusOr<json> JobController::WriteStatus(const json& job, const JobStatus& st) {
  const json wanted = ToJson(st);
  if (job.value("status", json()) == wanted) return job;
  ES_ASSIGN_OR_RETURN(json written, UpdateStatusWithRetry(*client_, kEasyScaleJobs, job,
                                                          [&](json& o) { o["status"] = wanted; }));
  Remember(written);
  return written;
}

void JobController::PublishPlan(const json& job, const JobSpec& spec, const JobStatus& st) {
  const std::string uid = job["metadata"].value("uid", "");
  ControlPlan p;
  p.job = ObjectKey(job);
  p.token = tokens_.TokenFor(uid);
  p.generation = st.generation;
  p.runningGeneration = st.runningGeneration;
  p.totalEsts = spec.ests;
  p.workers = st.workers;
  p.draining = st.draining;
  p.keep = st.handover;
  p.restore = st.restore;
  p.rendezvousUrl = options_.pod.controlUrl;
  p.rendezvousPrefix = absl::StrCat("gen-", st.generation, "-", epoch_);
  p.checkpointDir = DurableCheckpointDir(spec, uid);
  p.backend = options_.workerBackend;
  p.training = spec.training;
  p.output = spec.output;
  book_.Publish(std::move(p));
}

Status JobController::SyncPods(const json& job, const JobSpec& spec, const JobStatus& st,
                               const std::map<std::string, json>& pods, bool keepNone) {
  std::set<std::string> members;
  if (!keepNone) {
    for (const WorkerRecord& w : st.workers) members.insert(w.pod);
    for (const DrainingRecord& d : st.draining) members.insert(d.worker.pod);
    for (const DrainingRecord& d : st.handover) members.insert(d.worker.pod);
    // After a failure, the replacements wait out the backoff like the release:
    // a pod that fails at start must not be re-created in a tight loop.
    StatusOr<WallClock::time_point> after = ParseTime(st.restartAfter);
    const bool backingOff = st.runningGeneration < st.generation && !st.restartAfter.empty() &&
                            after.ok() && *after > WallClock::now();
    for (const WorkerRecord& w : st.workers) {
      if (backingOff || pods.count(w.pod) != 0) continue;
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
