// File: easyscale/operator/scheduler.h
//
// The inter-job scheduler: turns idle heterogeneous GPUs (node GPUs minus those
// inference holds or waits for) into per-job, per-node worker counts that
// maximise aggregate training throughput, within each job's min/max workers and
// priority. It is a pure function of its input: the operator's reconcile and the
// cluster simulator (easyscale-sim) call the same code.
//
//   InterJobScheduler s(SchedulerOptions{});
//   ScheduleResult r = s.Schedule(cluster);
//   for (const JobAllocation& a : r.allocations) ...  // desired workers per node
//   for (const Preemption& p : r.preemptions) ...     // workers to free now
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "easyscale/common/est_assignment.h"

namespace easyscale::op {

// One node's GPUs of one type, as the device plugin publishes them.
struct NodeGpus {
  std::string node;
  std::string gpuType;
  int total = 0;             // GPUs on the node
  int inferenceHeld = 0;     // held by inference pods
  int inferencePending = 0;  // wanted by pending inference pods on this node
};

// Workers a training job holds on one node now.
struct Placement {
  std::string node;
  std::string gpuType;
  int workers = 0;
  bool operator==(const Placement&) const = default;
};

struct JobDemand {
  std::string key;  // namespace/name
  int ests = 1;
  int minWorkers = 1;
  int maxWorkers = 1;
  int priority = 0;
  std::vector<std::string> gpuTypes;    // allowed; empty = any
  std::map<std::string, double> speed;  // samples/s of one worker per GPU type
  std::vector<Placement> current;       // what the job holds now
  int64_t submitOrder = 0;              // earlier jobs win ties
};

struct ClusterState {
  std::vector<NodeGpus> nodes;
  std::vector<JobDemand> jobs;
};

struct SchedulerOptions {
  // A change is made only if it raises the job's throughput by this fraction:
  // no churn for tiny gains.
  double minGain = 0.05;
  // Waste bound of the intra-job plan: a job is never grown (or handed GPUs in
  // a transfer) into a plan whose workers idle more than this share of their
  // GPU time within a step, waiting for its slowest worker: those GPUs serve
  // another job better. 0.30 is the EasyScale paper's cap. Growth is ranked by
  // relative gain, (new / old throughput - 1) per added GPU, so jobs of
  // different models compare in like units.
  double maxIdleFraction = 0.30;
  // Throughput of one worker of a type when the job reports none.
  std::map<std::string, double> defaultSpeed = {{"h200", 4.0}, {"h100", 3.5}, {"a100", 2.5},
                                                {"a10", 1.2},  {"l4", 1.0},   {"v100", 1.5},
                                                {"p100", 0.9}, {"t4", 0.6},   {"cpu", 0.1}};
  // Throughput of a type in neither the job's report nor defaultSpeed.
  double unknownTypeSpeed = 1.0;
  // Policy switches (the simulator's baselines turn them off/on):
  bool homogeneous = false;         // a job's workers all share one GPU type
  bool preemptForInference = true;  // false: training keeps its GPUs, inference waits
  bool reclaimForPriority = true;   // a waiting job may take GPUs from lower priorities
};

struct JobAllocation {
  std::string job;
  std::vector<Placement> placements;  // desired, sorted by (node, gpuType); empty = wait
  double throughput = 0.0;            // predicted samples/s
};

// Workers freed at once because inference wants their GPUs back (only these;
// priority reclaims and idle-worker sheds show as smaller allocations). A job
// pushed below minWorkers is listed for the node inference claims, and its
// allocation is empty: its workers elsewhere go too.
struct Preemption {
  std::string job;
  std::string node;
  std::string gpuType;
  int workers = 0;
};

struct ScheduleResult {
  std::vector<JobAllocation> allocations;  // one per job, in input order
  std::vector<Preemption> preemptions;
  double totalThroughput = 0.0;
};

class InterJobScheduler {
 public:
  explicit InterJobScheduler(SchedulerOptions options);
  // One decision, in four steps (operator/src/scheduler/phases.h):
  //  1. nodes where inference claims GPUs training holds: preempt now, taking
  //     workers from the lowest priority, then the job that loses least
  //     throughput (a job pushed below minWorkers loses all of it);
  //     workers that add no throughput (31 workers for 32 ESTs step like 16)
  //     are released;
  //  2. in (priority desc, submitOrder, key) order, a job below minWorkers gets
  //     its minimum from idle GPUs or from lower-priority jobs, or nothing;
  //  3. idle GPUs go to the step with the largest relative throughput gain
  //     per GPU (a step may also drop a slower type the job holds), never
  //     past maxIdleFraction; a job that held workers keeps its old plan
  //     unless it gains > minGain; then a bounded pass of GPU transfers
  //     between jobs;
  //  4. placements: current ones stay, new workers pack onto few nodes.
  // Deterministic and independent of input order: equal inputs give equal
  // outputs. Bad counts (negative, min > max) are clamped, never fatal.
  ScheduleResult Schedule(const ClusterState& cluster) const;

 private:
  SchedulerOptions options_;
};

// Predicted samples/s of `job` on `placements` under the speed model the
// scheduler uses: ests / max_i(count_i / speed_i) over the best EST assignment.
// 0 when the placements hold no worker or more workers than ESTs.
double PredictThroughput(const JobDemand& job, const std::vector<Placement>& placements,
                         const SchedulerOptions& options);

// How a job on `placements` uses its GPUs within one step, per GPU type
// (sorted by type): allocated workers and the share of their time they compute
// (the rest idles waiting for the slowest worker). Empty when the placements
// cannot run the job (no worker, or more workers than ESTs).
struct GpuTypeUse {
  std::string gpuType;
  int workers = 0;
  double usefulFraction = 0.0;  // busy GPU-seconds / (workers * step time)
};
std::vector<GpuTypeUse> PredictGpuUse(const JobDemand& job,
                                      const std::vector<Placement>& placements,
                                      const SchedulerOptions& options);

// Intra-job scheduler: spreads a job's ESTs over its workers so the step time
// is smallest given each worker's GPU type speed (AssignBySpeed underneath).
StatusOr<EstAssignment> AssignEsts(int ests, const std::vector<std::string>& workerGpuTypes,
                                   const std::map<std::string, double>& speed,
                                   const SchedulerOptions& options);

}  // namespace easyscale::op
