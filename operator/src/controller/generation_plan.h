// File: operator/src/controller/generation_plan.h
//
// The pure part of reconcile: turning the scheduler's desired placements for
// one job into its next worker generation. Workers that stay keep their pods
// (lowest ranks first); new ones get pods named for the new generation; the
// ESTs are spread by GPU speed (AssignEsts); every worker of the running
// generation must checkpoint (draining) before the new one is released.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "controller/job_status.h"
#include "easyscale/common/job_spec.h"
#include "easyscale/operator/kube_time.h"
#include "easyscale/operator/scheduler.h"

namespace easyscale::op {

struct PlanChange {
  bool changed = false;
  int oldWorkers = 0;
  int newWorkers = 0;
  // Scheduled | Restored | ScaledOut | ScaledIn | Preempted | Rescheduled | Restarted
  std::string reason;
  std::string message;
};

using PlacementCounts = std::map<std::pair<std::string, std::string>, int>;  // (node, type)

PlacementCounts CountPlacements(const std::vector<Placement>& placements);
PlacementCounts CountWorkers(const std::vector<WorkerRecord>& workers);
std::vector<Placement> ToPlacements(const PlacementCounts& counts);

// Updates `st` (generation, workers, draining, counters, startTime) when
// `desired` differs from its workers, or when `restart` (the running
// generation failed: a new one starts even on the same placements).
// `preempted` is how many of the job's workers the scheduler preempts for
// inference. `leaving` names worker pods the next generation must not keep,
// whatever the counts (one on a GPU the NVIDIA plugin gave inference, one the
// cluster evicted): a new pod takes the place of one still wanted.
StatusOr<PlanChange> PlanNextGeneration(const std::string& jobName, const JobSpec& spec,
                                        const std::vector<Placement>& desired, int preempted,
                                        bool restart, const std::string& now,
                                        const SchedulerOptions& options, JobStatus* st,
                                        const std::set<std::string>& leaving = {});

// Speeds of every GPU type in the unit the job measured: types without a
// measurement get their default scaled by how measured types compare with
// their defaults (measured samples/s and default relative speeds differ in unit).
std::map<std::string, double> CompleteSpeeds(const std::map<std::string, double>& measured,
                                             const SchedulerOptions& options);

// What the scheduler sees of the job `key`: its bounds and allowed types from
// the spec, the speeds it measured (completed), the placements it holds now.
JobDemand DemandOf(const std::string& key, const JobSpec& spec, const JobStatus& st,
                   const SchedulerOptions& options);

// True when the newest generation may run: nothing left to drain, workers to
// run it, and no failure backoff pending at `now`.
bool ReadyToRelease(const JobStatus& st, WallClock::time_point now);

// After a failure: the delay before the next generation may start, by the
// count of failures so far (0 for the first, then 1, 2, 4 ... capped).
std::chrono::milliseconds RestartBackoff(int restarts, std::chrono::milliseconds cap);

// Pending, Running, Scaling or Preempted from the plan (terminal phases are set elsewhere).
JobPhase PhaseOf(const JobStatus& st);

}  // namespace easyscale::op
