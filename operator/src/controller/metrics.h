// File: operator/src/controller/metrics.h
//
// The operator's Prometheus metrics, served as text exposition on /metrics:
//   easyscale_gpus{state="idle|training|inference",gpu_type}
//   easyscale_preemptions_total, easyscale_scale_events_total
//   easyscale_job_step{job}
//   easyscale_reconcile_duration_seconds, easyscale_schedule_duration_seconds
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace easyscale::op {

struct GpuCounts {
  int idle = 0;
  int training = 0;
  int inference = 0;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();

  void SetGpus(const std::map<std::string, GpuCounts>& byType);
  void AddPreemptions(int workers);
  void AddScaleEvent();
  void SetJobStep(const std::string& job, int64_t step);
  void ForgetJob(const std::string& job);
  void ObserveReconcile(double seconds);
  void ObserveSchedule(double seconds);
  std::string Text();  // Prometheus text format

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* gpus_;
  prometheus::Family<prometheus::Gauge>* jobStep_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* scaleEvents_;
  prometheus::Histogram* reconcile_;
  prometheus::Histogram* schedule_;
  std::mutex mu_;
  std::map<std::string, prometheus::Gauge*> steps_;
};

}  // namespace easyscale::op
