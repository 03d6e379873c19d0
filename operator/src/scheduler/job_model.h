// File: scheduler/job_model.h (internal)
//
// The scheduler's working view of a cluster: GPU types and node slots as
// indices, and each job's per-type worker counts with its per-type speeds.
// The step-time model is the one AssignBySpeed optimises: a worker of speed s
// that runs c ESTs per mini-batch takes c / s, and the job waits for its
// slowest worker. Workers of one type are interchangeable, so the model works
// on per-type counts, which keeps the allocation loop cheap.
#pragma once

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "easyscale/operator/scheduler.h"

namespace easyscale::op::internal {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Smallest step time of `ests` ESTs over counts[t] workers of speed speeds[t],
// each worker holding at least one EST; infinity with no worker or more
// workers than ESTs.
double StepTime(int ests, const std::vector<int>& counts, const std::vector<double>& speeds);

// ests / StepTime, 0 when the step time is infinite.
double Throughput(int ests, const std::vector<int>& counts, const std::vector<double>& speeds);

// How a step of `ests` ESTs uses counts[t] workers of speed speeds[t] under
// AssignBySpeed's water-filling (every worker one EST, each further EST where
// it finishes first): busy[t] is the GPU-seconds type t computes per step, the
// rest of counts[t] * stepTime idles waiting for the slowest worker.
struct StepUse {
  double stepTime = kInfinity;
  std::vector<double> busy;  // per type
  // Idle share of the allocated GPU time; 0 with no feasible plan.
  double IdleFraction(const std::vector<int>& counts) const;
};
StepUse UseInStep(int ests, const std::vector<int>& counts, const std::vector<double>& speeds);

// Speed of one worker of `type` for `job`: its report, else the default.
double SpeedOf(const JobDemand& job, const std::string& type, const SchedulerOptions& options);
bool AllowsType(const JobDemand& job, const std::string& type);

// One node's GPUs of one type.
struct Slot {
  std::string node;
  int type = 0;
  int capacity = 0;  // total - inferenceHeld - inferencePending, never negative
  int heldByInference = 0;
};

struct JobModel {
  const JobDemand* demand = nullptr;
  int input = 0;  // index in ClusterState::jobs
  int ests = 1;
  int minWorkers = 1;
  int maxWorkers = 1;              // capped at ests: a worker runs at least one EST
  std::vector<double> speed;       // per type; 0 = the job may not use it
  std::vector<int> counts;         // per type, the plan being built
  std::map<int, int> slotWorkers;  // slot -> workers, the job's placements
  int lockedType = -1;             // homogeneous policy: the one type it runs on

  int Workers() const;
  double Tp() const { return Throughput(ests, counts, speed); }
  double TpWith(int type, int delta) const;
  // The (priority desc, submitOrder, key) order: earlier is served first.
  bool ServedBefore(const JobModel& other) const;
};

// Types sorted by name; slots sorted by (node, type).
struct ClusterModel {
  std::vector<std::string> types;
  std::vector<Slot> slots;
  std::vector<JobModel> jobs;  // in service order
  std::vector<int> used;       // per slot, training workers planned there

  int TypeIndex(const std::string& name) const;                           // -1 if absent
  int SlotIndex(const std::string& node, const std::string& type) const;  // -1 if absent
};

// Builds the model: merges duplicate node entries, clamps bad counts, drops
// placements on unknown slots or disallowed types and trims jobs above their
// maximum.
ClusterModel BuildModel(const ClusterState& cluster, const SchedulerOptions& options);

}  // namespace easyscale::op::internal
