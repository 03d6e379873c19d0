// File: operator/src/controller/job_controller.h
//
// The EasyScaleJob controller, in sample-controller's shape: informers on
// jobs, pods and nodes whose handlers only enqueue job keys; one worker that
// takes keys off a rate-limited queue and runs Reconcile(key), which re-reads
// the cache, is idempotent, writes status on a copy, and whose Status decides
// requeue (transient) or drop. One worker, because every reconcile runs the
// inter-job scheduler over all jobs: a single writer keeps that view coherent.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "controller/control_book.h"
#include "controller/control_token.h"
#include "controller/metrics.h"
#include "controller/worker_pod.h"
#include "easyscale/operator/event_recorder.h"
#include "easyscale/operator/informer.h"
#include "easyscale/operator/kube_client.h"
#include "easyscale/operator/scheduler.h"
#include "easyscale/operator/work_queue.h"

namespace easyscale::op {

inline constexpr const char* kCleanupFinalizer = "easyscale.io/cleanup";

struct ControllerOptions {
  std::string ns;  // namespace of jobs to manage; empty = all
  WorkerPodOptions pod;
  std::string workerBackend = "auto";  // cpu | cuda | auto (cuda unless the type is cpu)
  std::chrono::milliseconds drainTimeout{std::chrono::seconds(30)};
  // How long workers of an earlier generation stay to serve the state to a
  // generation that holds none of it.
  std::chrono::milliseconds handoverTimeout{std::chrono::seconds(30)};
  std::chrono::milliseconds maxRestartBackoff{std::chrono::seconds(60)};
  std::chrono::milliseconds resyncPeriod{std::chrono::seconds(2)};
  // One NetworkPolicy per job: its worker pods take traffic from each other only.
  bool networkPolicy = true;
  SchedulerOptions scheduler;
};

// A worker the running generation lost, or that reported it could not go on.
struct WorkerFailure {
  std::string pod;
  std::string reason;  // CamelCase: WorkerLost, PeerLost, RendezvousFailed, ...
  std::string message;
  bool permanent = false;  // retrying cannot help (bad input, a corrupt file)
  int64_t generation = 0;  // the generation it broke
};

class JobController {
 public:
  JobController(KubeClient* client, EventRecorder* recorder, Metrics* metrics, ControlTokens tokens,
                ControllerOptions options);
  ~JobController();

  void StartInformers();
  bool HasSynced() const;
  // Starts reconciling (when this replica becomes the leader).
  void StartWorker();
  void Stop();

  Status Reconcile(const std::string& key);
  ControlBook& book() { return book_; }
  // The controller's cached view of a Pod ("namespace/name"): what it schedules
  // on, which may lag the API server (tests wait on it before acting).
  std::optional<nlohmann::json> CachedPod(const std::string& key) const { return pods_.Get(key); }
  WorkQueue& queue() { return queue_; }

 private:
  struct JobView;  // a job as the scheduler sees it
  void WorkerLoop();
  void ResyncLoop();
  void EnqueueAllJobs();
  nlohmann::json Freshest(const std::string& key, const nlohmann::json& cached);
  void Remember(const nlohmann::json& job);
  Status Finalize(const nlohmann::json& job);
  Status FailInvalid(const nlohmann::json& job, JobStatus st, const Status& why);
  // The job's control-token Secret and NetworkPolicy, once per job incarnation.
  Status EnsureJobObjects(const nlohmann::json& job);
  void MergeReports(const std::map<std::string, WorkerReport>& reports,
                    const std::map<std::string, nlohmann::json>& pods, JobStatus* st,
                    const nlohmann::json& job);
  std::vector<WorkerFailure> DropLostWorkers(const nlohmann::json& job,
                                             const std::map<std::string, nlohmann::json>& pods,
                                             const std::map<std::string, WorkerReport>& reports,
                                             JobStatus* st);
  // Counts the running generation's failures once; true when the job failed.
  bool RecordFailures(const nlohmann::json& job, const JobSpec& spec,
                      const std::vector<WorkerFailure>& failures, JobStatus* st);
  Status FailJob(const nlohmann::json& job, const JobSpec& spec, JobStatus st,
                 const std::string& reason, const std::string& message,
                 const std::map<std::string, nlohmann::json>& pods);
  // At release: where the new generation takes the job's state from.
  void PlanRestore(const nlohmann::json& job, const JobSpec& spec,
                   const std::map<std::string, WorkerReport>& reports,
                   const std::map<std::string, nlohmann::json>& pods, JobStatus* st);
  // Ends the hand-over once every member restored (or it timed out).
  void FinishHandover(const nlohmann::json& job, const std::map<std::string, WorkerReport>& reports,
                      JobStatus* st);
  ClusterState BuildCluster(const std::string& key, const JobStatus& self, size_t* selfIndex);
  StatusOr<nlohmann::json> WriteStatus(const nlohmann::json& job, const JobStatus& st);
  void PublishPlan(const nlohmann::json& job, const JobSpec& spec, const JobStatus& st);
  Status SyncPods(const nlohmann::json& job, const JobSpec& spec, const JobStatus& st,
                  const std::map<std::string, nlohmann::json>& pods, bool keepNone);

  KubeClient* client_;
  EventRecorder* recorder_;
  Metrics* metrics_;
  ControlTokens tokens_;
  ControllerOptions options_;
  // Names rendezvous prefixes: a new leader's store never mixes with an old one's.
  std::string epoch_;
  InterJobScheduler scheduler_;
  Informer jobs_;
  Informer pods_;
  Informer nodes_;
  WorkQueue queue_;
  ControlBook book_;
  std::mutex writtenMu_;
  std::map<std::string, nlohmann::json> written_;  // our newest write per job
  std::set<std::string> ensured_;                  // UIDs whose Secret and policy exist
  std::atomic<bool> stopped_{false};
  std::atomic<bool> acting_{false};  // StartWorker was called
  std::thread worker_;
  std::thread resync_;
};

}  // namespace easyscale::op
