// Reconcile of EasyScaleJob: validate, finalize, merge worker reports, schedule,
// plan the next generation, write status, then make the worker Pods match.
#include "controller/job_controller.h"

#include <openssl/rand.h>

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "controller/certificate_history.h"
#include "controller/generation_plan.h"
#include "controller/gpu_inventory.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"
#include "easyscale/common/sha256.h"
#include "easyscale/operator/kube_time.h"

namespace easyscale::op {

using nlohmann::json;

namespace {

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

const char* PodPhaseName(PodPhase phase) {
  switch (phase) {
    case PodPhase::kPending:
      return "Pending";
    case PodPhase::kRunning:
      return "Running";
    case PodPhase::kSucceeded:
      return "Succeeded";
    case PodPhase::kFailed:
      return "Failed";
    case PodPhase::kUnknown:
      break;
  }
  return "Unknown";
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
      jobs_(client, kEasyScaleJobs, {.ns = options_.ns}),
      pods_(client, kPods, {}),
      nodes_(client, kNodes, {}),
      // Named as controller-runtime names a controller's queue: its kind, lower case.
      queue_(BackoffOptions{std::chrono::milliseconds(50), std::chrono::seconds(30)},
             metrics->Queue("easyscalejob")),
      cycle_(&queue_, options_.scheduler, options_.scheduleWindow) {
  auto handlers = [this](auto apply, auto remove) {
    return InformerHandlers{
        .onAdd = [this, apply](const json& o) { OnChange((cache_.*apply)(o)); },
        .onUpdate = [this, apply](const json&, const json& o) { OnChange((cache_.*apply)(o)); },
        .onDelete = [this, remove](const json& o) { OnChange((cache_.*remove)(o)); }};
  };
  jobs_.AddHandlers(handlers(&ClusterCache::ApplyJob, &ClusterCache::RemoveJob));
  pods_.AddHandlers(handlers(&ClusterCache::ApplyPod, &ClusterCache::RemovePod));
  nodes_.AddHandlers(handlers(&ClusterCache::ApplyNode, &ClusterCache::RemoveNode));
  // The GPU gauges describe the cluster, not a job's reconcile: read from the
  // caches at each scrape, they stay right when no job runs. Only the acting
  // replica (the leader) shows them, as dashboards sum over the replicas.
  metrics_->SetGpuSource([this] {
    return acting_ && HasSynced() ? CountGpusByType(cache_.Nodes(), cache_.Pods())
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
  cycle_.MarkDirty();
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

void JobController::OnChange(const ClusterChange& change) {
  if (!change.job.empty()) queue_.Add(change.job);
  if (change.schedulingInput) cycle_.MarkDirty();
}

void JobController::EnqueueAllJobs() {
  for (const JobPtr& j : cache_.Jobs()) queue_.Add(j->key);
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
    if (*key == SchedulingCycle::kQueueKey) {
      try {
        RunSchedulingCycle();
      } catch (const std::exception& e) {  // a bug: never crash, the next change retries
        LogError("controller", "scheduling cycle failed", {{"error", e.what()}});
      }
      queue_.Done(*key);
      continue;
    }
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

JobPtr JobController::Freshest(const JobPtr& cached) {
  std::lock_guard<std::mutex> lock(writtenMu_);
  auto it = written_.find(cached->key);
  if (it == written_.end()) return cached;
  if (it->second->resourceVersion > cached->resourceVersion && it->second->uid == cached->uid) {
    return it->second;
  }
  written_.erase(it);
  return cached;
}

JobPtr JobController::Remember(json written) {
  auto view = std::make_shared<const JobView>(ParseJob(std::move(written)));
  std::lock_guard<std::mutex> lock(writtenMu_);
  written_[view->key] = view;
  return view;
}

Status JobController::Reconcile(const std::string& key) {
  const JobPtr cached = cache_.Job(key);
  if (!cached) {  // deleted: the garbage collector removes its pods
    book_.Forget(key);
    metrics_->ForgetJob(key);
    rates_.erase(key);
    std::lock_guard<std::mutex> lock(writtenMu_);
    written_.erase(key);
    return absl::OkStatus();
  }
  JobPtr job = Freshest(cached);
  if (job->deleting) return Finalize(*job);
  if (!job->hasFinalizer) {
    ES_ASSIGN_OR_RETURN(json updated,
                        UpdateWithRetry(*client_, kEasyScaleJobs, job->object, [](json& o) {
                          if (!ParseJob(o).hasFinalizer) {
                            o["metadata"]["finalizers"].push_back(kCleanupFinalizer);
                          }
                        }));
    job = Remember(std::move(updated));
  }
  const int64_t generation = job->metadataGeneration;
  if (!job->status.ok()) {
    LogWarn("controller", "unreadable status; starting over",
            {{"job", key}, {"error", job->status.status().ToString()}});
  }
  JobStatus st = job->status.ok() ? *job->status : JobStatus{};
  if (!job->spec.ok()) return FailInvalid(job, st, job->spec.status());
  const JobSpec& spec = *job->spec;

  const json* failed = FindCondition(st.conditions, "Failed");
  if (st.phase == JobPhase::kFailed && failed != nullptr &&
      failed->value("reason", "") == "Invalid" &&
      st.observedGeneration < generation) {  // the spec was fixed: start again
    st.phase = JobPhase::kPending;
    SetCondition(st.conditions, "Failed", false, "Valid", "the spec is valid", generation);
  }
  const PodsByName pods = cache_.WorkerPodsOf(*job);
  if (IsTerminal(st.phase)) return SyncPods(*job, spec, st, pods, /*keepNone=*/true);
  ES_RETURN_IF_ERROR(EnsureJobObjects(*job));

  JobStatus next = st;
  next.observedGeneration = generation;
  if (FindCondition(next.conditions, "Created") == nullptr) {
    SetCondition(next.conditions, "Created", true, "Created",
                 absl::StrCat("EasyScaleJob ", key, " is created"), generation);
  }
  const std::map<std::string, WorkerReport> reports = book_.Reports(key);
  MergeReports(reports, pods, &next, *job);
  // The history is no reason to hold the job up: what failed is tried again.
  if (Status s = StoreCertificates(*job, &next); !s.ok()) {
    LogWarn("controller", "certificate history not written; will retry",
            {{"job", key}, {"error", s.ToString()}});
  }
  if (next.certificate.step > 0) metrics_->SetJobCertifiedStep(key, next.certificate.step);
  if (next.phase == JobPhase::kSucceeded) {
    SetProgress(*job, spec, &next);
    ES_ASSIGN_OR_RETURN(JobPtr written, WriteStatus(job, next));
    metrics_->CountJob(JobCount::kSucceeded, job->ns);
    recorder_->Normal(
        written->object, "Succeeded",
        absl::StrCat("training finished at step ", next.step, "; digest ", next.digest));
    book_.Forget(key);
    metrics_->SetJobGpuUse(key, {});
    return SyncPods(*written, spec, next, pods, /*keepNone=*/true);
  }
  const std::vector<WorkerFailure> failures = DropLostWorkers(*job, pods, reports, &next);
  const int64_t failedBefore = next.failedGeneration;
  if (RecordFailures(*job, spec, failures, &next)) {
    const WorkerFailure& last = failures.back();
    return FailJob(
        job, spec, next, last.permanent ? "WorkerFailed" : "BackoffLimitExceeded",
        last.permanent
            ? absl::StrCat("worker ", last.pod, " failed and retrying cannot help: ", last.message)
            : absl::StrCat(next.restarts, " worker failures, more than the backoff limit ",
                           spec.runPolicy.backoffLimit, "; the last: ", last.pod, ": ",
                           last.message),
        pods);
  }
  const bool restart = next.failedGeneration != failedBefore;

  // The job's part of the latest plan; a job the last cycle did not see yet
  // keeps what it holds (its arrival has arranged the next cycle). A
  // suspended job holds nothing: its workers drain to a checkpoint, as for a
  // scale-in, and their pods go.
  const std::optional<JobPlan> plan = spec.suspend ? std::nullopt : cycle_.PlanFor(key);
  const std::vector<Placement> desired =
      plan ? plan->placements
           : (spec.suspend ? std::vector<Placement>{} : ToPlacements(CountWorkers(next.workers)));
  int preempted = plan ? plan->preempted : 0;
  const std::set<std::string> leaving = LeavingWorkers(*job, next, pods, &preempted);
  ES_ASSIGN_OR_RETURN(PlanChange change,
                      PlanNextGeneration(job->name, spec, desired, preempted, restart, NowTime(),
                                         options_.scheduler, &next, leaving));
  if (ReadyToRelease(next, WallClock::now())) {
    next.runningGeneration = next.generation;
    PlanRestore(*job, spec, reports, pods, &next);
  }
  FinishHandover(*job, reports, &next);
  // Suspended and drained: no worker is left to serve the state to.
  if (spec.suspend && next.workers.empty() && next.draining.empty()) next.handover.clear();
  next.phase = spec.suspend && next.workers.empty() ? JobPhase::kSuspended : PhaseOf(next);
  SetSuspended(*job, spec, &next);
  SetProgress(*job, spec, &next);
  SetCondition(next.conditions, "Running", next.phase == JobPhase::kRunning, PhaseName(next.phase),
               absl::StrCat(next.workers.size(), " workers in generation ", next.generation),
               generation);
  if (spec.checkpoint.claimName.empty()) {
    SetCondition(next.conditions, "DurableCheckpoint", false, "NoClaim",
                 "no spec.checkpoint.claimName: the job survives the loss of some of its "
                 "workers (the others hold its state), not of all of them at once",
                 generation);
  } else {
    SetCondition(
        next.conditions, "DurableCheckpoint", true, "Claim",
        absl::StrCat("checkpoints every ", spec.training.checkpointEvery, " steps in claim ",
                     spec.checkpoint.claimName, " at ", DurableCheckpointDir(spec, job->uid)),
        generation);
  }

  ES_ASSIGN_OR_RETURN(JobPtr written, WriteStatus(job, next));
  if (st.observedGeneration == 0) metrics_->CountJob(JobCount::kCreated, job->ns);
  if (restart) metrics_->CountJob(JobCount::kRestarted, job->ns);
  PublishPlan(*written, spec, next);
  metrics_->SetJobStep(key, next.step);
  const JobDemand demand = DemandOf(key, spec, next, options_.scheduler);
  metrics_->SetJobGpuUse(key, PredictGpuUse(demand, demand.current, options_.scheduler));
  const Status synced = SyncPods(*written, spec, next, pods, /*keepNone=*/false);
  // After the pods: an Event must not delay a GPU's use. A suspension's
  // drain is told by the Suspended Event.
  if (change.changed && !spec.suspend) {
    metrics_->AddScaleEvent();
    if (preempted > 0) metrics_->AddPreemptions(preempted);
    if (change.reason == "Preempted" || change.reason == "Restarted") {
      recorder_->Warning(written->object, change.reason, change.message);
    } else {
      recorder_->Normal(written->object, change.reason, change.message);
    }
  }
  ES_RETURN_IF_ERROR(synced);

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

Status JobController::Finalize(const JobView& job) {
  // From the API server, not the cache: a pod created just before the deletion
  // may not have reached the informer yet, and the finalizer must wait for it.
  StatusOr<json> listed =
      client_->List(kPods, job.ns, {.labelSelector = absl::StrCat(kJobLabel, "=", job.name)});
  if (!listed.ok()) return listed.status();
  const json& items = (*listed)["items"];
  if (!items.is_array()) return absl::InternalError("pod list: items is not an array");
  int64_t owned = 0;
  for (const json& item : items) {
    const PodView p = ParsePod(item);
    if (!IsWorkerOf(p, job)) continue;
    ++owned;
    if (p.deleting) continue;  // already terminating
    Status s = client_->Delete(kPods, job.ns, p.name);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  book_.Forget(job.key);
  if (!job.hasFinalizer) return absl::OkStatus();
  if (owned > 0) {
    // The job goes when its pods have: until then they may still be training
    // on their GPUs (and writing to its checkpoint directory).
    queue_.AddAfter(job.key, std::chrono::milliseconds(500));
    LogInfo("controller", "finalizing: waiting for worker pods",
            {{"job", job.key}, {"pods", owned}});
    return absl::OkStatus();
  }
  StatusOr<json> out = UpdateWithRetry(*client_, kEasyScaleJobs, job.object, [](json& o) {
    json kept = json::array();
    for (const json& f : o["metadata"].value("finalizers", json::array())) {
      if (f != kCleanupFinalizer) kept.push_back(f);
    }
    o["metadata"]["finalizers"] = kept;
  });
  if (!out.ok() && !absl::IsNotFound(out.status())) return out.status();
  LogInfo("controller", "finalized", {{"job", job.key}});
  return absl::OkStatus();
}

Status JobController::FailInvalid(const JobPtr& job, JobStatus st, const Status& why) {
  const int64_t generation = job->metadataGeneration;
  const std::string message(why.message());
  const json* c = FindCondition(st.conditions, "Failed");
  if (st.phase == JobPhase::kFailed && c != nullptr && c->value("reason", "") == "Invalid" &&
      c->value("message", "") == message && st.observedGeneration == generation) {
    return absl::OkStatus();  // already reported; a bad spec is not retried
  }
  st.phase = JobPhase::kFailed;
  SetCondition(st.conditions, "Failed", true, "Invalid", message, generation);
  SetCondition(st.conditions, "Running", false, "Failed", message, generation);
  const bool first = st.observedGeneration == 0;
  st.observedGeneration = generation;
  ES_ASSIGN_OR_RETURN(JobPtr written, WriteStatus(job, st));
  if (first) metrics_->CountJob(JobCount::kCreated, job->ns);
  metrics_->CountJob(JobCount::kFailed, job->ns);
  recorder_->Warning(written->object, "Failed", "Invalid spec: " + message);
  book_.Forget(job->key);
  return SyncPods(*written, JobSpec{}, st, cache_.WorkerPodsOf(*job), /*keepNone=*/true);
}

Status JobController::EnsureJobObjects(const JobView& job) {
  const std::string& uid = job.uid;
  if (ensured_.count(uid) != 0) return absl::OkStatus();
  std::vector<std::pair<const Resource*, json>> objects = {
      {&kSecrets, BuildControlSecret(job.object, tokens_.TokenFor(uid))}};
  if (options_.networkPolicy) {
    objects.push_back({&kNetworkPolicies, BuildWorkerNetworkPolicy(job.object)});
  }
  for (const auto& [resource, object] : objects) {
    StatusOr<json> created = client_->Create(*resource, job.ns, object);
    if (!created.ok() && !absl::IsAlreadyExists(created.status())) return created.status();
  }
  ensured_.insert(uid);
  return absl::OkStatus();
}

void JobController::MergeReports(const std::map<std::string, WorkerReport>& reports,
                                 const PodsByName& pods, JobStatus* st, const JobView& job) {
  // A drained worker that leaves the job stays to serve the state only when no
  // worker that stays holds it (every worker of a generation holds all of it).
  const bool staying = std::any_of(st->workers.begin(), st->workers.end(), [&](const auto& w) {
    auto it = pods.find(w.pod);
    return it != pods.end() && it->second->generation < st->generation;
  });
  std::erase_if(st->draining, [&](const DrainingRecord& d) {
    const std::optional<WorkerReport> r = Newest(reports, d.worker.pod);
    if (!DrainedBy(d, r)) return false;
    // The step it stopped at: with no worker left (suspended), no other says it.
    if (r->generation == st->runningGeneration) st->step = std::max(st->step, r->step);
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
    if (r->state == WorkerState::kSucceeded && !r->digest.empty() &&
        st->phase != JobPhase::kSucceeded) {
      st->phase = JobPhase::kSucceeded;
      st->digest = r->digest;
      st->testAccuracy = r->testAccuracy;
      st->output = r->output;
      st->completionTime = NowTime();
      SetCondition(st->conditions, "Succeeded", true, "Completed", "digest " + r->digest,
                   job.metadataGeneration);
      SetCondition(st->conditions, "Running", false, "Succeeded", "training finished",
                   job.metadataGeneration);
    }
  }
  for (const auto& [type, sn] : speed) st->speed[type] = sn.first / sn.second;
}

bool JobController::PodGone(const JobView& job, const PodsByName& pods, const std::string& pod) {
  if (auto it = pods.find(pod); it != pods.end()) return it->second->Terminated();
  StatusOr<json> live = client_->Get(kPods, job.ns, pod);
  if (absl::IsNotFound(live.status())) return true;
  if (!live.ok()) return false;  // unknown: ask again at the next reconcile
  const PodView v = ParsePod(*live);
  return v.ownerUid != job.uid || v.Terminated();  // another incarnation's pod is not ours
}

Status JobController::StoreCertificates(const JobView& job, JobStatus* st) {
  const std::vector<Certificate> pending = book_.PendingCertificates(job.key);
  if (pending.empty()) return absl::OkStatus();
  const std::string name = CertificateConfigMapName(job.name);
  StatusOr<json> current = client_->Get(kConfigMaps, job.ns, name);
  if (!current.ok() && !absl::IsNotFound(current.status())) return current.status();
  std::vector<Certificate> history;
  if (current.ok()) {
    const json& owners = (*current)["metadata"].value("ownerReferences", json::array());
    if (owners.size() != 1 || owners[0].value("uid", "") != job.uid) {
      return absl::FailedPreconditionError("ConfigMap " + job.ns + "/" + name +
                                           " exists and is not this job's");
    }
    const json& data = (*current).value("data", json::object());
    StatusOr<std::vector<Certificate>> read =
        ParseCertificateHistory(data.value(kCertificatesKey, ""));
    if (read.ok()) {
      history = *std::move(read);
    } else {
      LogWarn("controller", "unreadable certificate history; starting it again",
              {{"job", job.key}, {"configMap", name}, {"error", read.status().ToString()}});
    }
  }
  CertificateMerge merged = MergeCertificates(std::move(history), pending);
  for (const std::string& conflict : merged.conflicts) {
    recorder_->Warning(job.object, "CertificateMismatch", conflict);
  }
  if (merged.changed) {
    json cm = BuildCertificateConfigMap(job.object, merged.history);
    if (current.ok()) cm["metadata"]["resourceVersion"] = ResourceVersionOf(*current);
    StatusOr<json> written =
        current.ok() ? client_->Update(kConfigMaps, cm) : client_->Create(kConfigMaps, job.ns, cm);
    if (!written.ok()) return written.status();
  }
  book_.Stored(job.key, pending.back().step);
  if (!merged.history.empty() && merged.history.back().step > st->certificate.step) {
    st->certificate = merged.history.back();
  }
  return absl::OkStatus();
}

std::set<std::string> JobController::LeavingWorkers(const JobView& job, const JobStatus& st,
                                                    const PodsByName& pods, int* preempted) {
  int besideInference = 0;
  std::set<std::string> leaving;
  for (const WorkerRecord& w : st.workers) {
    const NodePtr node = cache_.Node(w.node);
    if (node != nullptr && node->inventory.workersBesideInference.count(job.ns + "/" + w.pod)) {
      leaving.insert(w.pod);
      ++besideInference;
    } else if (auto pod = pods.find(w.pod); pod != pods.end() && pod->second->Disrupted()) {
      leaving.insert(w.pod);
      recorder_->Warning(
          job.object, "WorkerDisrupted",
          absl::StrCat("worker pod ", w.pod, " on ", w.node, " was ended by the cluster (",
                       pod->second->disruptionReason, "); the next generation replaces it"));
    }
  }
  *preempted = std::max(*preempted, besideInference);
  return leaving;
}

std::vector<WorkerFailure> JobController::DropLostWorkers(
    const JobView& job, const PodsByName& pods, const std::map<std::string, WorkerReport>& reports,
    JobStatus* st) {
  const auto now = WallClock::now();
  auto gone = [&](const std::string& pod) { return PodGone(job, pods, pod); };
  std::erase_if(st->draining, [&](const DrainingRecord& d) {
    if (gone(d.worker.pod)) return true;  // nothing to wait for
    StatusOr<WallClock::time_point> since = ParseTime(d.since);
    if (since.ok() && now - *since > options_.drainTimeout) {
      recorder_->Warning(job.object, "DrainTimeout",
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
    if (it == pods.end() || !it->second->Terminated()) return false;  // missing = to create
    if (it->second->Rejected()) return false;  // never ran: SyncPods makes it again
    const PodView& pod = *it->second;
    if (pod.Disrupted()) return false;  // no failure: the next generation replaces it
    // A rank other than 0 ends once it has trained every step, before rank 0
    // has the digest that ends the job: done, not lost.
    if (pod.phase == PodPhase::kSucceeded) {
      const std::optional<WorkerReport> r = Newest(reports, w.pod);
      if (r && r->state == WorkerState::kSucceeded) return false;
    }
    const bool permanent = pod.exit && pod.exit->code == kPermanentExitCode;
    std::string message =
        absl::StrCat("worker pod ", w.pod, " on ", w.node, " ended: ", PodPhaseName(pod.phase));
    if (pod.exit) {
      absl::StrAppend(&message, ", exit code ", pod.exit->code,
                      pod.exit->reason.empty() ? "" : " (" + pod.exit->reason + ")");
    }
    if (std::optional<WorkerReport> r = Newest(reports, w.pod); r && !r->message.empty()) {
      absl::StrAppend(&message, "; it said: ", r->message);
    }
    recorder_->Warning(job.object, "WorkerLost", message);
    failures.push_back(
        {w.pod, permanent ? kPermanentErrorReason : "WorkerLost", message, permanent,
         // It failed the generation it was running, else the one it waited for.
         pod.generation <= st->runningGeneration ? st->runningGeneration : st->generation});
    return true;
  });
  // A member of the released generation that stopped it on its own: a peer
  // was lost, the rendezvous failed, its backend broke, its input is bad.
  if (st->runningGeneration == st->generation) {
    for (const WorkerRecord& w : st->workers) {
      std::optional<WorkerReport> r = Newest(reports, w.pod);
      auto pod = pods.find(w.pod);
      if (pod != pods.end() && pod->second->Disrupted()) continue;  // stopped on SIGTERM
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

bool JobController::RecordFailures(const JobView& job, const JobSpec& spec,
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
  SetCondition(st->conditions, "Restarting", true, first.reason, first.message,
               job.metadataGeneration);
  recorder_->Warning(job.object, "WorkerFailed",
                     absl::StrCat(first.message, " (failure ", st->restarts, " of at most ",
                                  spec.runPolicy.backoffLimit + 1, ")"));
  if (permanent || st->restarts > spec.runPolicy.backoffLimit) return true;
  ++st->failuresInARow;
  const auto delay = RestartBackoff(st->failuresInARow, options_.maxRestartBackoff);
  st->restartAfter = delay.count() > 0 ? FormatTime(WallClock::now() + delay) : "";
  return false;
}

Status JobController::FailJob(const JobPtr& job, const JobSpec& spec, JobStatus st,
                              const std::string& reason, const std::string& message,
                              const PodsByName& pods) {
  const int64_t observed = job->metadataGeneration;
  st.phase = JobPhase::kFailed;
  st.completionTime = NowTime();
  st.estimatedRemainingSeconds = -1;
  SetCondition(st.conditions, "Failed", true, reason, message, observed);
  SetCondition(st.conditions, "Running", false, reason, message, observed);
  SetCondition(st.conditions, "Restarting", false, reason, "the job failed", observed);
  ES_ASSIGN_OR_RETURN(JobPtr written, WriteStatus(job, st));
  metrics_->CountJob(JobCount::kFailed, job->ns);
  recorder_->Warning(written->object, "Failed", message);
  book_.Forget(job->key);
  metrics_->SetJobGpuUse(job->key, {});
  return SyncPods(*written, spec, st, pods, /*keepNone=*/true);
}

void JobController::PlanRestore(const JobView& job, const JobSpec& spec,
                                const std::map<std::string, WorkerReport>& reports,
                                const PodsByName& pods, JobStatus* st) {
  // Workers that hold the whole job's state: those that stay first.
  std::vector<std::pair<const WorkerReport*, bool>> holders;
  for (const auto& [pod, r] : reports) {
    if (r.stateStep < 0 || r.stateUrl.empty() || PodGone(job, pods, pod)) continue;
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
      recorder_->Warning(job.object, "StateLost",
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

void JobController::FinishHandover(const JobView& job,
                                   const std::map<std::string, WorkerReport>& reports,
                                   JobStatus* st) {
  if (st->runningGeneration < st->generation || st->workers.empty()) return;
  const bool restored = std::all_of(st->workers.begin(), st->workers.end(), [&](const auto& w) {
    std::optional<WorkerReport> r = Newest(reports, w.pod);
    return r && r->generation >= st->runningGeneration &&
           (r->state == WorkerState::kRunning || r->state == WorkerState::kCheckpointed ||
            r->state == WorkerState::kSucceeded);
  });
  const int64_t observed = job.metadataGeneration;
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
    recorder_->Warning(job.object, "HandoverTimeout",
                       absl::StrCat("generation ", st->runningGeneration,
                                    " did not take the state from the leaving workers in time"));
  }
  if (restored || late) st->handover.clear();
}

void JobController::SetSuspended(const JobView& job, const JobSpec& spec, JobStatus* st) {
  const json* before = FindCondition(st->conditions, "Suspended");
  const bool was = before != nullptr && before->value("status", "") == "True";
  if (!spec.suspend && !was) return;
  const std::string queue = absl::StrCat("queue ", job.queueName, " (", kQueueNameLabel, ")");
  std::string reason;
  std::string message;
  if (!spec.suspend) {
    reason = job.queueName.empty() ? "Resumed" : "Admitted";
    message = job.queueName.empty()
                  ? "spec.suspend is false: the job runs again"
                  : absl::StrCat("admitted from ", queue, ": spec.suspend is false");
  } else if (!job.queueName.empty() && st->startTime.empty()) {
    reason = "WaitingForAdmission";
    message =
        absl::StrCat("waits in ", queue, " until Kueue admits it by setting spec.suspend to false");
  } else {
    reason = "Suspended";
    if (!st->draining.empty()) {
      message = absl::StrCat("spec.suspend: ", st->draining.size(),
                             " workers checkpoint at the next step, then their pods are deleted");
    } else if (st->startTime.empty()) {
      message = "spec.suspend: no worker pods until it is false";
    } else if (!spec.checkpoint.claimName.empty()) {
      message = absl::StrCat(
          "spec.suspend: no worker pods; the job resumes from its durable "
          "checkpoint in claim ",
          spec.checkpoint.claimName, " when it is false");
    } else {
      message = absl::StrCat(
          "spec.suspend: no worker pods; no durable checkpoint "
          "(spec.checkpoint.claimName) keeps the state of step ",
          st->step, ": training starts over when it is false");
    }
  }
  SetCondition(st->conditions, "Suspended", spec.suspend, reason, message, job.metadataGeneration);
  if (was != spec.suspend) recorder_->Normal(job.object, reason, message);
}

void JobController::SetProgress(const JobView& job, const JobSpec& spec, JobStatus* st) {
  const int64_t total = spec.training.steps;
  st->progressPercentage = static_cast<int>(std::clamp<int64_t>(st->step * 100 / total, 0, 100));
  if (spec.suspend || IsTerminal(st->phase)) {
    rates_.erase(job.key);  // a resumed job measures its rate afresh
    st->estimatedRemainingSeconds = -1;
    return;
  }
  StepRate& rate = rates_[job.key];
  const StepRate::Clock::time_point now = StepRate::Clock::now();
  rate.Observe(st->step, now);
  st->estimatedRemainingSeconds = rate.RemainingSeconds(st->step, total, now).value_or(-1);
}

StatusOr<JobPtr> JobController::WriteStatus(const JobPtr& job, const JobStatus& st) {
  const json wanted = ToJson(st);
  if (job->object.value("status", json()) == wanted) return job;
  ES_ASSIGN_OR_RETURN(json written, UpdateStatusWithRetry(*client_, kEasyScaleJobs, job->object,
                                                          [&](json& o) { o["status"] = wanted; }));
  return Remember(std::move(written));
}

void JobController::PublishPlan(const JobView& job, const JobSpec& spec, const JobStatus& st) {
  const std::string& uid = job.uid;
  ControlPlan p;
  p.job = job.key;
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
  p.certificateEvery = spec.certificate.everySteps;
  book_.Publish(std::move(p));
}

std::map<std::string, int> JobController::FreeGpusByNode() const {
  std::map<std::string, int> free;
  for (const NodePtr& n : cache_.Nodes()) {
    for (const auto& [type, count] : n->inventory.healthy) free[n->name] += count;
  }
  // As kubelet counts a node's GPUs: every pod admitted or about to be that
  // has not ended holds its request until it is gone.
  for (const PodPtr& p : cache_.Pods()) {
    if (p->Ended()) continue;
    if (p->role == PodRole::kWorker) --free[p->node];
    if (p->role == PodRole::kInference && p->phase == PodPhase::kRunning) {
      free[p->node] -= p->inferenceGpus;
    }
  }
  return free;
}

Status JobController::DeleteRejected(const JobView& job, const PodView& pod) {
  Status s = client_->Delete(kPods, pod.ns, pod.name, 0);
  if (absl::IsNotFound(s)) return absl::OkStatus();
  ES_RETURN_IF_ERROR(s);
  recorder_->Warning(job.object, "WorkerNotAdmitted",
                     absl::StrCat("the kubelet of ", pod.node, " rejected worker pod ", pod.name,
                                  " (", pod.rejectedReason, ": ", pod.rejectedMessage,
                                  "); it is made again once a GPU there is free"));
  LogWarn("controller", "worker pod rejected by its node; made again",
          {{"pod", pod.name}, {"node", pod.node}, {"reason", pod.rejectedReason}});
  return absl::OkStatus();
}

Status JobController::SyncPods(const JobView& job, const JobSpec& spec, const JobStatus& st,
                               const PodsByName& pods, bool keepNone) {
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
    std::optional<std::map<std::string, int>> free;  // GPUs by node, once a pod is to make
    for (const WorkerRecord& w : st.workers) {
      if (backingOff) continue;
      if (auto it = pods.find(w.pod); it != pods.end()) {
        if (it->second->Rejected() && !it->second->deleting) {
          ES_RETURN_IF_ERROR(DeleteRejected(job, *it->second));
        }
        continue;
      }
      if (!free) free = FreeGpusByNode();
      // A real kubelet rejects a pod bound to a node without a free GPU (its
      // GPU may still be held by another job's draining worker): wait for one.
      if (int& n = (*free)[w.node]; n > 0) {
        --n;
      } else {
        LogDebug("controller", "worker pod waits for a free GPU",
                 {{"pod", w.pod}, {"node", w.node}});
        queue_.AddAfter(job.key, std::chrono::milliseconds(250));
        continue;
      }
      const json pod = BuildWorkerPod(job.object, spec, w, st.generation, options_.pod);
      StatusOr<json> created = client_->Create(kPods, job.ns, pod);
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
    if (members.count(name) != 0 || pod->deleting) continue;
    Status s = client_->Delete(kPods, pod->ns, name);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
    LogInfo("controller", "worker pod deleted", {{"pod", name}});
  }
  return absl::OkStatus();
}

}  // namespace easyscale::op
