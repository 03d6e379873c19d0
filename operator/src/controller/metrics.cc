// prometheus-cpp registry and the text serializer.
#include "controller/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace easyscale::op {

namespace {
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  gpus_ = &prometheus::BuildGauge()
               .Name("easyscale_gpus")
               .Help("GPUs by state (idle, training, inference) and type")
               .Register(*registry_);
  jobStep_ = &prometheus::BuildGauge()
                  .Name("easyscale_job_step")
                  .Help("Newest step a job's workers reported")
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

void Metrics::SetJobStep(const std::string& job, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = steps_.find(job);
  if (it == steps_.end()) it = steps_.emplace(job, &jobStep_->Add({{"job", job}})).first;
  it->second->Set(static_cast<double>(step));
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

void Metrics::ObserveReconcile(double seconds) { reconcile_->Observe(seconds); }
void Metrics::ObserveSchedule(double seconds) { schedule_->Observe(seconds); }

std::string Metrics::Text() {
  {
    std::lock_guard<std::mutex> lock(gpuMu_);
    SetGpusLocked(gpuSource_ ? gpuSource_() : std::map<std::string, GpuCounts>());
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace easyscale::op
