// File: scheduler/phases.h (internal)
//
// The steps of InterJobScheduler::Schedule, in the order it runs them:
//   1. PreemptForInference  slot level: free GPUs that inference claims, at once
//   1b. ShedIdleWorkers    type level: workers that add no throughput go back
//   2. SecureMinimums       type level: priority order, each waiting job gets its
//                           minWorkers or nothing (may reclaim from lower priority)
//   3. GrowForThroughput    type level: greedy relative gain per GPU within the
//                           waste bound, then undo
//                           growth that does not beat minGain (no churn)
//   4. PlaceOnNodes         slot level: turn per-type counts into node placements,
//                           keeping current ones and packing new ones
// Type level means the job's plan is its per-type `counts`; `freeByType` is the
// pool of GPUs no job plans to use.
#pragma once

#include <vector>

#include "job_model.h"

namespace easyscale::op::internal {

std::vector<Preemption> PreemptForInference(ClusterModel* m);

// GPUs of each type that no training worker occupies.
std::vector<int> FreeByType(const ClusterModel& m);

// Drops workers whose job runs as fast without them (e.g. 31 workers for 32
// ESTs step like 16: two ESTs on someone either way), so other jobs can use them.
void ShedIdleWorkers(ClusterModel* m, std::vector<int>* freeByType);

void SecureMinimums(ClusterModel* m, const SchedulerOptions& options, std::vector<int>* freeByType);

// `nowTp[j]`: the throughput job j has before this decision (0 if waiting).
void GrowForThroughput(ClusterModel* m, const SchedulerOptions& options,
                       const std::vector<double>& nowTp, std::vector<int>* freeByType);

// 3b. Bounded local improvement: a job a few GPUs short of a step that pays
// off takes them from the jobs that lose least by giving them (a donor may
// replace one with a free GPU of another type).
void ImproveByTransfers(ClusterModel* m, const SchedulerOptions& options,
                        std::vector<int>* freeByType);

void PlaceOnNodes(ClusterModel* m);

// A growth step: `gpus` more workers of `type` for job `job` (service order).
struct Step {
  double gainPerGpu = 0.0;  // relative: (new / old throughput - 1) / gpus
  int job = 0;
  int type = 0;
  int gpus = 0;
  unsigned version = 0;
  int dropType = -1;  // the step also gives back all `dropped` workers of this slower type
  int dropped = 0;
};

// The job's best next step from the pool (only `onlyType` when >= 0): per
// type, from the fewest extra workers that raise its throughput up to
// doubling, possibly dropping all workers of a slower type (not with
// `onlyType`), with the plan's idle fraction within options.maxIdleFraction,
// scored by relative gain per net added GPU. False when no step helps.
bool BestStep(const JobModel& j, int index, const SchedulerOptions& options,
              const std::vector<int>& freeByType, int onlyType, Step* out);

// Gives `n` of the job's planned workers of type `t` back to the pool.
void Release(JobModel* j, int t, int n, std::vector<int>* freeByType);
void ReleaseAll(JobModel* j, std::vector<int>* freeByType);

}  // namespace easyscale::op::internal
