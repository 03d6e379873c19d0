// File: operator/src/controller/metrics.h
//
// The operator's Prometheus metrics, served as text exposition on /metrics:
//   easyscale_gpus{state="idle|training|inference",gpu_type}  (training: held
//     by worker pods; inference: held by inference; idle: the rest)
//   easyscale_preemptions_total, easyscale_scale_events_total
//   easyscale_jobs_{created,succeeded,failed,restarted}_total{namespace}  (as
//     Kubeflow's training-operator counts its jobs; restarted: restarts after
//     a worker failure)
//   easyscale_job_step{job}
//   easyscale_job_allocated_gpus{job,gpu_type}, easyscale_job_useful_gpus{job,gpu_type}
//     (useful: the allocated GPUs times the share of each step they compute,
//     under the measured speeds; the rest waits for the slowest worker)
//   easyscale_useful_gpus{gpu_type}  (the jobs' useful GPUs summed)
//   easyscale_job_certified_step{job}  (the newest certificate, certificate_history.h)
//   easyscale_reconcile_duration_seconds, easyscale_schedule_duration_seconds
// and the work queue's, with controller-runtime's names and meaning, labelled
// by the queue's name:
//   workqueue_depth{name}, workqueue_adds_total{name},
//   workqueue_queue_duration_seconds{name}  (first add -> handed to a worker),
//   workqueue_work_duration_seconds{name}   (handed out -> Done)
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "controller/gpu_inventory.h"
#include "easyscale/operator/scheduler.h"
#include "easyscale/operator/work_queue.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace easyscale::op {

// What CountJob counts: a job's first status, its end, a restart after a failure.
enum class JobCount { kCreated, kSucceeded, kFailed, kRestarted };

class Metrics {
 public:
  Metrics();
  ~Metrics();

  // Where easyscale_gpus comes from: asked by every Text(), so the gauges show
  // the cluster as it is when scraped, whether or not any job is running.
  // Empty: no gauges. `source` must stay callable until it is replaced.
  using GpuSource = std::function<std::map<std::string, GpuCounts>()>;
  void SetGpuSource(GpuSource source);
  void AddPreemptions(int workers);
  void AddScaleEvent();
  void CountJob(JobCount what, const std::string& ns);
  void SetJobStep(const std::string& job, int64_t step);
  void SetJobGpuUse(const std::string& job, const std::vector<GpuTypeUse>& use);
  void SetJobCertifiedStep(const std::string& job, int64_t step);
  void ForgetJob(const std::string& job);
  void ObserveReconcile(double seconds);
  void ObserveSchedule(double seconds);
  // The work queue `name`'s metrics, for WorkQueue's constructor; lives as
  // long as this object.
  WorkQueueMetrics* Queue(const std::string& name);
  std::string Text();  // Prometheus text format

 private:
  void SetGpusLocked(const std::map<std::string, GpuCounts>& byType);  // gpuMu_ held
  void SetUsefulByTypeLocked();                                        // mu_ held

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* gpus_;
  prometheus::Family<prometheus::Gauge>* jobStep_;
  prometheus::Family<prometheus::Gauge>* jobCertifiedStep_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* scaleEvents_;
  std::array<prometheus::Family<prometheus::Counter>*, 4> jobCounts_;  // by JobCount
  prometheus::Histogram* reconcile_;
  prometheus::Histogram* schedule_;
  std::mutex mu_;
  std::map<std::string, prometheus::Gauge*> steps_;
  prometheus::Family<prometheus::Gauge>* jobAllocatedGpus_;
  prometheus::Family<prometheus::Gauge>* jobUsefulGpus_;
  prometheus::Family<prometheus::Gauge>* usefulGpus_;
  struct JobGpuGauges {
    double useful = 0.0;
    prometheus::Gauge* allocated = nullptr;
    prometheus::Gauge* usefulGauge = nullptr;
  };
  std::map<std::string, std::map<std::string, JobGpuGauges>> jobGpus_;  // job -> type ->
  std::map<std::string, prometheus::Gauge*> usefulByType_;
  std::map<std::string, prometheus::Gauge*> certifiedSteps_;
  std::mutex gpuMu_;  // held while the source runs: replacing it waits for a scrape
  GpuSource gpuSource_;
  // By type: the idle, training and inference gauges.
  std::map<std::string, std::array<prometheus::Gauge*, 3>> gpuGauges_;
  struct QueueFamilies {
    prometheus::Family<prometheus::Gauge>* depth = nullptr;
    prometheus::Family<prometheus::Counter>* adds = nullptr;
    prometheus::Family<prometheus::Histogram>* queued = nullptr;
    prometheus::Family<prometheus::Histogram>* worked = nullptr;
  };
  QueueFamilies queueFamilies_;
  class QueueMetrics;
  std::mutex queuesMu_;
  std::map<std::string, std::unique_ptr<QueueMetrics>> queues_;
};

}  // namespace easyscale::op
