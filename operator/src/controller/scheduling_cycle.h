// File: operator/src/controller/scheduling_cycle.h
//
// One scheduling cycle per batch of cluster changes, as Kubernetes schedulers
// do. A change to a scheduler input (a job's demand or workers, a GPU that
// inference claims or frees, a node's GPUs) marks the cluster dirty; the first
// mark after a cycle puts the cycle's key on the work queue after the
// coalescing window, so every change inside the window is served by one run of
// the inter-job scheduler over every job. The controller's single worker takes
// the key like a job's (so a cycle never overlaps a reconcile and always sees
// the statuses reconciles wrote), computes the plan and keeps it; each job's
// reconcile then applies its own part of the latest plan and never schedules.
//   SchedulingCycle cycle(&queue, options, std::chrono::milliseconds(100));
//   cycle.MarkDirty();                              // from informer handlers
//   if (key == SchedulingCycle::kQueueKey) {        // in the worker
//     cycle.Begin();
//     ScheduleResult r = cycle.Run(BuildCluster());
//   }
//   std::optional<JobPlan> p = cycle.PlanFor("ns/job");  // in a job's reconcile
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "easyscale/operator/scheduler.h"
#include "easyscale/operator/work_queue.h"

namespace easyscale::op {

// One job's part of a plan.
struct JobPlan {
  std::vector<Placement> placements;  // desired; empty = wait
  int preempted = 0;                  // of its workers, freed for inference now
  int64_t cycle = 0;                  // the cycle that computed it
};

class SchedulingCycle {
 public:
  // Not a job key: those are always "namespace/name".
  static constexpr const char* kQueueKey = "scheduling-cycle";

  SchedulingCycle(WorkQueue* queue, SchedulerOptions options, std::chrono::milliseconds window);

  // Any thread: a scheduler input changed. Arranges one cycle `window` from
  // the first mark since the last cycle began; later marks join it.
  void MarkDirty();
  // The worker took kQueueKey: changes from now on arrange the next cycle.
  void Begin();
  // Runs the scheduler over `cluster` and keeps the plan of every job in it.
  ScheduleResult Run(const ClusterState& cluster);

  std::optional<JobPlan> PlanFor(const std::string& job) const;
  int64_t cycles() const;

 private:
  WorkQueue* queue_;
  InterJobScheduler scheduler_;
  std::chrono::milliseconds window_;
  mutable std::mutex mu_;
  bool pending_ = false;  // the key is on the queue, or waiting out the window
  int64_t cycles_ = 0;
  std::map<std::string, JobPlan> plan_;
};

}  // namespace easyscale::op
