// File: operator/sim/baselines.h
//
// The EasyScale paper's policies, for comparison with the operator's own
// InterJobScheduler on the same inputs. Both take and give what the
// scheduler does (ClusterState in, one JobAllocation per job out); the
// simulator calls them once per 60 s round. Re-implemented from the paper's
// description and the behaviour of its SC'23 artifact, not from its code.
//
//   PaperPolicy  new jobs get their lowest proposal (one GPU, the slowest
//                allowed type with one free) in submit order; each running
//                job proposes per GPU type its best step-up (k more GPUs of
//                that type, at most doubling its GPUs, within maxWorkers and
//                the 0.30 waste cap, options.maxIdleFraction); step-ups are
//                granted by relative speedup per added GPU, at most one per
//                job per round. A job keeps its GPUs until it ends.
//   YarnCs       FIFO gang scheduling as the artifact runs its YARN-CS
//                baseline: the earliest unfinished job runs alone on
//                maxWorkers GPUs of its first allowed type (capped at that
//                type's GPUs); every later job waits.
#pragma once

#include "easyscale/operator/scheduler.h"

namespace easyscale::sim {

op::ScheduleResult PaperPolicy(const op::ClusterState& cluster,
                               const op::SchedulerOptions& options);
op::ScheduleResult YarnCs(const op::ClusterState& cluster, const op::SchedulerOptions& options);

}  // namespace easyscale::sim
