// prometheus-cpp registry and the text serializer.
#include "controller/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>

namespace easyscale::op {

namespace {
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
// controller-runtime's queue histograms use decades (1e-8 .. 1e3 s); these
// are finer where a GPU's hand-over is decided (a millisecond to seconds).
const prometheus::Histogram::BucketBoundaries kQueueBuckets = {
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}  // namespace

// One queue's series in the families Metrics registered, labelled {name}.
class Metrics::QueueMetrics : public WorkQueueMetrics {
 public:
  QueueMetrics(const QueueFamilies& f, const std::string& name)
      : depth_(&f.depth->Add({{"name", name}})),
        adds_(&f.adds->Add({{"name", name}})),
        queued_(&f.queued->Add({{"name", name}}, kQueueBuckets)),
        worked_(&f.worked->Add({{"name", name}}, kQueueBuckets)) {}
  void Added(size_t depth) override {
    adds_->Increment();
    depth_->Set(static_cast<double>(depth));
  }
  void Started(size_t depth, std::chrono::duration<double> queued) override {
    depth_->Set(static_cast<double>(depth));
    queued_->Observe(queued.count());
  }
  void Finished(std::chrono::duration<double> worked) override { worked_->Observe(worked.count()); }

 private:
  prometheus::Gauge* depth_;
  prometheus::Counter* adds_;
  prometheus::Histogram* queued_;
  prometheus::Histogram* worked_;
};

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  gpus_ = &prometheus::BuildGauge()
               .Name("easyscale_gpus")
               .Help("GPUs by state (idle, training, inference) and type")
               .Register(*registry_);
  jobStep_ = &prometheus::BuildGauge()
                  .Name("easyscale_job_step")
                  .Help("Newest step a job's workers reported")
                  .Register(*registry_);
  jobAllocatedGpus_ = &prometheus::BuildGauge()
                           .Name("easyscale_job_allocated_gpus")
                           .Help("GPUs a job's workers hold, by type")
                           .Register(*registry_);
  jobUsefulGpus_ = &prometheus::BuildGauge()
                        .Name("easyscale_job_useful_gpus")
                        .Help("A job's GPUs times the share of each step they compute, by type")
                        .Register(*registry_);
  usefulGpus_ = &prometheus::BuildGauge()
                     .Name("easyscale_useful_gpus")
                     .Help("The jobs' useful GPUs summed, by type")
                     .Register(*registry_);
  jobCertifiedStep_ = &prometheus::BuildGauge()
                           .Name("easyscale_job_certified_step")
                           .Help("Newest step of a job whose state digest the history holds")
                           .Register(*registry_);
  preemptions_ = &prometheus::BuildCounter()
                      .Name("easyscale_preemptions_total")
                      .Help("Training workers preempted for inference")
                      .Register(*registry_)
                      .Add({});
  scaleEvents_ = &prometheus::BuildCounter()
                      .Name("easyscale_scale_events_total")
                      .Help("Changes of a job's worker set")
                      .Register(*registry_)
                      .Add({});
  const std::array<std::pair<const char*, const char*>, 4> jobCounts = {{
      {"easyscale_jobs_created_total", "EasyScaleJobs the operator started"},
      {"easyscale_jobs_succeeded_total", "EasyScaleJobs that finished training"},
      {"easyscale_jobs_failed_total", "EasyScaleJobs that failed"},
      {"easyscale_jobs_restarted_total", "Restarts of EasyScaleJobs after a worker failure"},
  }};
  for (size_t i = 0; i < jobCounts.size(); ++i) {
    jobCounts_[i] = &prometheus::BuildCounter()
                         .Name(jobCounts[i].first)
                         .Help(jobCounts[i].second)
                         .Register(*registry_);
  }
  reconcile_ = &prometheus::BuildHistogram()
                    .Name("easyscale_reconcile_duration_seconds")
                    .Help("Time of one EasyScaleJob reconcile")
                    .Register(*registry_)
                    .Add({}, kLatencyBuckets);
  schedule_ = &prometheus::BuildHistogram()
                   .Name("easyscale_schedule_duration_seconds")
                   .Help("Time of one inter-job scheduling decision")
                   .Register(*registry_)
                   .Add({}, kLatencyBuckets);
  // controller-runtime's names and help texts.
  queueFamilies_ = {
      .depth = &prometheus::BuildGauge()
                    .Name("workqueue_depth")
                    .Help("Current depth of workqueue")
                    .Register(*registry_),
      .adds = &prometheus::BuildCounter()
                   .Name("workqueue_adds_total")
                   .Help("Total number of adds handled by workqueue")
                   .Register(*registry_),
      .queued = &prometheus::BuildHistogram()
                     .Name("workqueue_queue_duration_seconds")
                     .Help("How long in seconds an item stays in workqueue before being requested")
                     .Register(*registry_),
      .worked = &prometheus::BuildHistogram()
                     .Name("workqueue_work_duration_seconds")
                     .Help("How long in seconds processing an item from workqueue takes")
                     .Register(*registry_)};
}

Metrics::~Metrics() = default;

void Metrics::SetGpuSource(GpuSource source) {
  std::lock_guard<std::mutex> lock(gpuMu_);
  gpuSource_ = std::move(source);
}

void Metrics::SetGpusLocked(const std::map<std::string, GpuCounts>& byType) {
  for (auto it = gpuGauges_.begin(); it != gpuGauges_.end();) {  // types no node offers now
    if (byType.count(it->first) != 0) {
      ++it;
      continue;
    }
    for (prometheus::Gauge* g : it->second) gpus_->Remove(g);
    it = gpuGauges_.erase(it);
  }
  for (const auto& [type, c] : byType) {
    auto& gauges = gpuGauges_[type];
    if (gauges[0] == nullptr) {
      gauges = {&gpus_->Add({{"state", "idle"}, {"gpu_type", type}}),
                &gpus_->Add({{"state", "training"}, {"gpu_type", type}}),
                &gpus_->Add({{"state", "inference"}, {"gpu_type", type}})};
    }
    gauges[0]->Set(c.idle);
    gauges[1]->Set(c.training);
    gauges[2]->Set(c.inference);
  }
}

void Metrics::AddPreemptions(int workers) { preemptions_->Increment(workers); }
void Metrics::AddScaleEvent() { scaleEvents_->Increment(); }

void Metrics::CountJob(JobCount what, const std::string& ns) {
  // Family::Add returns the existing counter for labels it has seen.
  jobCounts_[static_cast<size_t>(what)]->Add({{"namespace", ns}}).Increment();
}

void Metrics::SetJobStep(const std::string& job, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = steps_.find(job);
  if (it == steps_.end()) it = steps_.emplace(job, &jobStep_->Add({{"job", job}})).first;
  it->second->Set(static_cast<double>(step));
}

void Metrics::SetJobGpuUse(const std::string& job, const std::vector<GpuTypeUse>& use) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, JobGpuGauges>& byType = jobGpus_[job];
  for (auto it = byType.begin(); it != byType.end();) {  // types the job no longer holds
    const bool held = std::any_of(use.begin(), use.end(),
                                  [&](const GpuTypeUse& u) { return u.gpuType == it->first; });
    if (held) {
      ++it;
      continue;
    }
    jobAllocatedGpus_->Remove(it->second.allocated);
    jobUsefulGpus_->Remove(it->second.usefulGauge);
    it = byType.erase(it);
  }
  for (const GpuTypeUse& u : use) {
    JobGpuGauges& g = byType[u.gpuType];
    if (g.allocated == nullptr) {
      g.allocated = &jobAllocatedGpus_->Add({{"job", job}, {"gpu_type", u.gpuType}});
      g.usefulGauge = &jobUsefulGpus_->Add({{"job", job}, {"gpu_type", u.gpuType}});
    }
    g.useful = u.workers * u.usefulFraction;
    g.allocated->Set(u.workers);
    g.usefulGauge->Set(g.useful);
  }
  if (byType.empty()) jobGpus_.erase(job);
}

void Metrics::SetJobCertifiedStep(const std::string& job, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = certifiedSteps_.find(job);
  if (it == certifiedSteps_.end()) {
    it = certifiedSteps_.emplace(job, &jobCertifiedStep_->Add({{"job", job}})).first;
  }
  it->second->Set(static_cast<double>(step));
}

void Metrics::ForgetJob(const std::string& job) {
  SetJobGpuUse(job, {});
  std::lock_guard<std::mutex> lock(mu_);
  if (auto c = certifiedSteps_.find(job); c != certifiedSteps_.end()) {
    jobCertifiedStep_->Remove(c->second);
    certifiedSteps_.erase(c);
  }
  auto it = steps_.find(job);
  if (it == steps_.end()) return;
  jobStep_->Remove(it->second);
  steps_.erase(it);
}

void Metrics::SetUsefulByTypeLocked() {
  std::map<std::string, double> sums;
  for (const auto& [job, byType] : jobGpus_) {
    for (const auto& [type, g] : byType) sums[type] += g.useful;
  }
  for (auto it = usefulByType_.begin(); it != usefulByType_.end();) {  // types no job holds
    if (sums.count(it->first) != 0) {
      ++it;
      continue;
    }
    usefulGpus_->Remove(it->second);
    it = usefulByType_.erase(it);
  }
  for (const auto& [type, sum] : sums) {
    prometheus::Gauge*& g = usefulByType_[type];
    if (g == nullptr) g = &usefulGpus_->Add({{"gpu_type", type}});
    g->Set(sum);
  }
}

void Metrics::ObserveReconcile(double seconds) { reconcile_->Observe(seconds); }
void Metrics::ObserveSchedule(double seconds) { schedule_->Observe(seconds); }

WorkQueueMetrics* Metrics::Queue(const std::string& name) {
  std::lock_guard<std::mutex> lock(queuesMu_);
  std::unique_ptr<QueueMetrics>& q = queues_[name];
  if (!q) q = std::make_unique<QueueMetrics>(queueFamilies_, name);
  return q.get();
}

std::string Metrics::Text() {
  {
    std::lock_guard<std::mutex> lock(gpuMu_);
    SetGpusLocked(gpuSource_ ? gpuSource_() : std::map<std::string, GpuCounts>());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    SetUsefulByTypeLocked();
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace easyscale::op
