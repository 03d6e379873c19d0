#include <algorithm>
#include <cmath>

#include "easyscale/operator/scheduler.h"
#include "phases.h"

namespace easyscale::op {

using internal::ClusterModel;
using internal::JobModel;

InterJobScheduler::InterJobScheduler(SchedulerOptions options) : options_(std::move(options)) {}

ScheduleResult InterJobScheduler::Schedule(const ClusterState& cluster) const {
  ClusterModel m = internal::BuildModel(cluster, options_);
  ScheduleResult result;
  if (options_.preemptForInference) result.preemptions = internal::PreemptForInference(&m);

  std::vector<double> nowTp;
  for (const JobModel& j : m.jobs) nowTp.push_back(j.Workers() >= j.minWorkers ? j.Tp() : 0.0);
  std::vector<int> freeByType = internal::FreeByType(m);
  internal::ShedIdleWorkers(&m, &freeByType);
  internal::SecureMinimums(&m, options_, &freeByType);
  internal::GrowForThroughput(&m, options_, nowTp, &freeByType);
  internal::ImproveByTransfers(&m, options_, &freeByType);
  internal::ShedIdleWorkers(&m, &freeByType);  // donors may have been left with some
  internal::PlaceOnNodes(&m);

  result.allocations.resize(cluster.jobs.size());
  for (JobModel& j : m.jobs) {
    JobAllocation& a = result.allocations[j.input];
    a.job = j.demand->key;
    // Placement can fall short only where training holds GPUs inference
    // waits for; below its minimum the job then waits like any other.
    if (j.Workers() < j.minWorkers) continue;
    for (const auto& [slot, w] : j.slotWorkers) {
      a.placements.push_back(Placement{m.slots[slot].node, m.types[m.slots[slot].type], w});
    }
    a.throughput = j.Tp();
    result.totalThroughput += a.throughput;
  }
  return result;
}

namespace {

// The placements as per-type counts and speeds, types sorted by name.
struct TypeCounts {
  std::vector<std::string> types;
  std::vector<int> counts;
  std::vector<double> speeds;
};

TypeCounts CountByType(const JobDemand& job, const std::vector<Placement>& placements,
                       const SchedulerOptions& options) {
  std::map<std::string, int> byType;
  for (const Placement& p : placements) {
    if (p.workers > 0) byType[p.gpuType] += p.workers;
  }
  TypeCounts out;
  for (const auto& [type, n] : byType) {
    out.types.push_back(type);
    out.counts.push_back(n);
    out.speeds.push_back(internal::SpeedOf(job, type, options));
  }
  return out;
}

}  // namespace

double PredictThroughput(const JobDemand& job, const std::vector<Placement>& placements,
                         const SchedulerOptions& options) {
  const TypeCounts c = CountByType(job, placements, options);
  return internal::Throughput(std::max(1, job.ests), c.counts, c.speeds);
}

std::vector<GpuTypeUse> PredictGpuUse(const JobDemand& job,
                                      const std::vector<Placement>& placements,
                                      const SchedulerOptions& options) {
  const TypeCounts c = CountByType(job, placements, options);
  const internal::StepUse use = internal::UseInStep(std::max(1, job.ests), c.counts, c.speeds);
  std::vector<GpuTypeUse> out;
  if (!std::isfinite(use.stepTime) || use.stepTime <= 0.0) return out;
  for (size_t t = 0; t < c.types.size(); ++t) {
    out.push_back(GpuTypeUse{c.types[t], c.counts[t], use.busy[t] / (c.counts[t] * use.stepTime)});
  }
  return out;
}

StatusOr<EstAssignment> AssignEsts(int ests, const std::vector<std::string>& workerGpuTypes,
                                   const std::map<std::string, double>& speed,
                                   const SchedulerOptions& options) {
  JobDemand job;
  job.speed = speed;
  std::vector<double> speeds;
  for (const std::string& type : workerGpuTypes) {
    speeds.push_back(internal::SpeedOf(job, type, options));
  }
  return AssignBySpeed(ests, speeds);
}

}  // namespace easyscale::op
