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
  // Throughput of one worker of a type when the job reports none.
  std::map<std::string, double> defaultSpeed = {{"h200", 4.0}, {"h100", 3.5}, {"a100", 2.5},
                                                {"a10", 1.2},  {"l4", 1.0},   {"v100", 1.5},
                                                {"t4", 0.6},   {"cpu", 0.1}};
};

struct JobAllocation {
  std::string job;
  std::vector<Placement> placements;  // desired; empty = the job holds nothing
  double throughput = 0.0;            // predicted samples/s
};

// A worker freed at once because inference wants its GPU back.
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
  // Deterministic: equal inputs give equal outputs.
  ScheduleResult Schedule(const ClusterState& cluster) const;

 private:
  SchedulerOptions options_;
};

// Intra-job scheduler: spreads a job's ESTs over its workers so the step time
// is smallest given each worker's GPU type speed (AssignBySpeed underneath).
StatusOr<EstAssignment> AssignEsts(int ests, const std::vector<std::string>& workerGpuTypes,
                                   const std::map<std::string, double>& speed,
                                   const SchedulerOptions& options);

}  // namespace easyscale::op
