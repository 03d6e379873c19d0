// File: operator/src/controller/job_controller.h
//
// The EasyScaleJob controller, in sample-controller's shape: informers on
// jobs, pods and nodes whose handlers parse each object once into the typed
// cache (cluster_cache.h), enqueue the job a change concerns and mark the
// cluster dirty when a scheduler input changed; one worker takes keys off a
// rate-limited queue. A job's key runs Reconcile(key), which re-reads the
// cache, applies the job's part of the latest scheduling plan, is idempotent,
// writes status on a copy, and whose Status decides requeue (transient) or
// drop. The scheduling cycle's key (scheduling_cycle.h) runs the inter-job
// scheduler over every job once per batch of changes. One worker: a single
// writer keeps the plan coherent with the statuses it was computed from.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "controller/cluster_cache.h"
#include "controller/control_book.h"
#include "controller/control_token.h"
#include "controller/metrics.h"
#include "controller/scheduling_cycle.h"
#include "controller/step_rate.h"
#include "controller/worker_pod.h"
#include "easyscale/operator/event_recorder.h"
#include "easyscale/operator/informer.h"
#include "easyscale/operator/kube_client.h"
#include "easyscale/operator/scheduler.h"
#include "easyscale/operator/work_queue.h"

namespace easyscale::op {

struct ControllerOptions {
  std::string ns;  // namespace of jobs to manage; empty = all
  WorkerPodOptions pod;
  std::string workerBackend = "auto";  // cpu | cuda | auto (cuda unless the type is cpu)
  std::chrono::milliseconds drainTimeout{std::chrono::seconds(30)};
  // How long workers of an earlier generation stay to serve the state to a
  // generation that holds none of it.
  std::chrono::milliseconds handoverTimeout{std::chrono::seconds(30)};
  std::chrono::milliseconds maxRestartBackoff{std::chrono::seconds(60)};
  // Every job is reconciled this often (its step and speed reach the status).
  std::chrono::milliseconds resyncPeriod{std::chrono::seconds(2)};
  // Changes within this window after the first are served by one scheduling
  // cycle: longer batches more changes, shorter frees a GPU sooner.
  std::chrono::milliseconds scheduleWindow{std::chrono::milliseconds(100)};
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

using PodsByName = std::map<std::string, PodPtr>;

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
  // One scheduling cycle over every job; enqueues the jobs whose plan changed.
  void RunSchedulingCycle();
  ControlBook& book() { return book_; }
  // The controller's cached view of a Pod ("namespace/name"): what it schedules
  // on, which may lag the API server (tests wait on it before acting).
  PodPtr CachedPod(const std::string& key) const { return cache_.Pod(key); }
  JobPtr CachedJob(const std::string& key) const { return cache_.Job(key); }
  WorkQueue& queue() { return queue_; }
  const SchedulingCycle& cycle() const { return cycle_; }

 private:
  void WorkerLoop();
  void ResyncLoop();
  void EnqueueAllJobs();
  void OnChange(const ClusterChange& change);
  // Our own newest write of the job when the cache has not caught up with it.
  JobPtr Freshest(const JobPtr& cached);
  JobPtr Remember(nlohmann::json written);
  Status Finalize(const JobView& job);
  Status FailInvalid(const JobPtr& job, JobStatus st, const Status& why);
  // The job's control-token Secret and NetworkPolicy, once per job incarnation.
  Status EnsureJobObjects(const JobView& job);
  void MergeReports(const std::map<std::string, WorkerReport>& reports, const PodsByName& pods,
                    JobStatus* st, const JobView& job);
  // Whether a worker pod of `job` has ended or is gone. The cache may not have
  // seen a pod created moments ago: one it lacks is looked up on the server.
  bool PodGone(const JobView& job, const PodsByName& pods, const std::string& pod);
  // Appends the certificates the workers reported to the job's history
  // ConfigMap and sets status.certificate to the newest stored.
  Status StoreCertificates(const JobView& job, JobStatus* st);
  // Workers of `st` the next generation must not keep: one on a GPU the NVIDIA
  // plugin gave inference (counted in `*preempted`), one the cluster ended
  // (DisruptionTarget: an eviction, no failure; a WorkerDisrupted Event).
  std::set<std::string> LeavingWorkers(const JobView& job, const JobStatus& st,
                                       const PodsByName& pods, int* preempted);
  std::vector<WorkerFailure> DropLostWorkers(const JobView& job, const PodsByName& pods,
                                             const std::map<std::string, WorkerReport>& reports,
                                             JobStatus* st);
  // Counts the running generation's failures once; true when the job failed.
  bool RecordFailures(const JobView& job, const JobSpec& spec,
                      const std::vector<WorkerFailure>& failures, JobStatus* st);
  Status FailJob(const JobPtr& job, const JobSpec& spec, JobStatus st, const std::string& reason,
                 const std::string& message, const PodsByName& pods);
  // At release: where the new generation takes the job's state from.
  void PlanRestore(const JobView& job, const JobSpec& spec,
                   const std::map<std::string, WorkerReport>& reports, const PodsByName& pods,
                   JobStatus* st);
  // Ends the hand-over once every member restored (or it timed out).
  void FinishHandover(const JobView& job, const std::map<std::string, WorkerReport>& reports,
                      JobStatus* st);
  // spec.suspend: the Suspended condition (why the job waits, or that it was
  // admitted or resumed) and an Event when it flips.
  void SetSuspended(const JobView& job, const JobSpec& spec, JobStatus* st);
  // progressPercentage, and estimatedRemainingSeconds from the job's step rate.
  void SetProgress(const JobView& job, const JobSpec& spec, JobStatus* st);
  // The scheduler's input: every active job and every node's GPUs.
  ClusterState BuildCluster();
  StatusOr<JobPtr> WriteStatus(const JobPtr& job, const JobStatus& st);
  void PublishPlan(const JobView& job, const JobSpec& spec, const JobStatus& st);
  // GPUs no pod holds or waits for, by node, as a kubelet counts them.
  std::map<std::string, int> FreeGpusByNode() const;
  // Deletes a worker pod a kubelet rejected, so that it is made again.
  Status DeleteRejected(const JobView& job, const PodView& pod);
  Status SyncPods(const JobView& job, const JobSpec& spec, const JobStatus& st,
                  const PodsByName& pods, bool keepNone);

  KubeClient* client_;
  EventRecorder* recorder_;
  Metrics* metrics_;
  ControlTokens tokens_;
  ControllerOptions options_;
  // Names rendezvous prefixes: a new leader's store never mixes with an old one's.
  std::string epoch_;
  Informer jobs_;
  Informer pods_;
  Informer nodes_;
  ClusterCache cache_;
  WorkQueue queue_;
  SchedulingCycle cycle_;
  ControlBook book_;
  std::mutex writtenMu_;
  std::map<std::string, JobPtr> written_;  // our newest write per job
  std::set<std::string> ensured_;          // UIDs whose Secret and policy exist
  std::map<std::string, StepRate> rates_;  // per job; the worker thread's only
  std::atomic<bool> stopped_{false};
  std::atomic<bool> acting_{false};  // StartWorker was called
  std::thread worker_;
  std::thread resync_;
};

}  // namespace easyscale::op
