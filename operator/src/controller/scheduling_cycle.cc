// The scheduling cycle: coalesce changes, schedule every job once, keep the plan.
#include "controller/scheduling_cycle.h"

namespace easyscale::op {

SchedulingCycle::SchedulingCycle(WorkQueue* queue, SchedulerOptions options,
                                 std::chrono::milliseconds window)
    : queue_(queue), scheduler_(std::move(options)), window_(window) {}

void SchedulingCycle::MarkDirty() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_) return;
    pending_ = true;
  }
  queue_->AddAfter(kQueueKey, window_);
}

void SchedulingCycle::Begin() {
  std::lock_guard<std::mutex> lock(mu_);
  pending_ = false;
}

ScheduleResult SchedulingCycle::Run(const ClusterState& cluster) {
  ScheduleResult result = scheduler_.Schedule(cluster);
  std::map<std::string, JobPlan> plan;
  std::lock_guard<std::mutex> lock(mu_);
  ++cycles_;
  for (const JobAllocation& a : result.allocations) {
    plan[a.job] = {a.placements, 0, cycles_};
  }
  for (const Preemption& p : result.preemptions) plan[p.job].preempted += p.workers;
  plan_ = std::move(plan);
  return result;
}

std::optional<JobPlan> SchedulingCycle::PlanFor(const std::string& job) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plan_.find(job);
  return it == plan_.end() ? std::nullopt : std::optional<JobPlan>(it->second);
}

int64_t SchedulingCycle::cycles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cycles_;
}

}  // namespace easyscale::op
