// File: operator/src/controller/generation_plan.h
//
// The pure part of reconcile: turning the scheduler's desired placements for
// one job into its next worker generation. Workers that stay keep their pods
// (lowest ranks first); new ones get pods named for the new generation; the
// ESTs are spread by GPU speed (AssignEsts); every worker of the running
// generation must checkpoint (draining) before the new one is released.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "controller/job_status.h"
#include "easyscale/common/job_spec.h"
#include "easyscale/operator/scheduler.h"

namespace easyscale::op {

struct PlanChange {
  bool changed = false;
  int oldWorkers = 0;
  int newWorkers = 0;
  std::string reason;  // Scheduled | Restored | ScaledOut | ScaledIn | Preempted | Rescheduled
  std::string message;
};

using PlacementCounts = std::map<std::pair<std::string, std::string>, int>;  // (node, type)

PlacementCounts CountPlacements(const std::vector<Placement>& placements);
PlacementCounts CountWorkers(const std::vector<WorkerRecord>& workers);
std::vector<Placement> ToPlacements(const PlacementCounts& counts);

// Updates `st` (generation, workers, draining, counters, startTime) when
// `desired` differs from its workers. `preempted` is how many of the job's
// workers the scheduler preempts for inference.
StatusOr<PlanChange> PlanNextGeneration(const std::string& jobName, const JobSpec& spec,
                                        const std::vector<Placement>& desired, int preempted,
                                        const std::string& now, const SchedulerOptions& options,
                                        JobStatus* st);

// Speeds of every GPU type in the unit the job measured: types without a
// measurement get their default scaled by how measured types compare with
// their defaults (measured samples/s and default relative speeds differ in unit).
std::map<std::string, double> CompleteSpeeds(const std::map<std::string, double>& measured,
                                             const SchedulerOptions& options);

// Releases the newest generation once nothing is left to drain.
void ReleaseIfDrained(JobStatus* st);

// Pending, Running, Scaling or Preempted from the plan (terminal phases are set elsewhere).
std::string PhaseOf(const JobStatus& st);

}  // namespace easyscale::op
