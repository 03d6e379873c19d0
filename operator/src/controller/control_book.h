// File: operator/src/controller/control_book.h
//
// What the worker control endpoint answers, per job: the plan reconcile last
// wrote to the job's status (generation, members, draining workers of the
// running generation), and the newest report of every worker pod. Reconcile
// publishes plans; the control server reads them and records reports.
//   GET assignment for pod P of job J:
//     P in plan.workers     -> the newest generation; Run once it is released
//                              (runningGeneration == generation, or every
//                              draining worker's newest report here says it
//                              checkpointed: DrainedBy), else Wait
//     P draining only       -> its running generation, CheckpointAndStop
//     otherwise             -> NotFound (the worker exits)
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "controller/job_status.h"
#include "easyscale/common/control_protocol.h"

namespace easyscale::op {

struct ControlPlan {
  std::string job;  // namespace/name
  int64_t generation = 0;
  int64_t runningGeneration = 0;
  int totalEsts = 1;
  std::vector<WorkerRecord> workers;
  std::vector<DrainingRecord> draining;
  std::string checkpointDir;
  std::string backend = "auto";  // auto: cpu for gpuType "cpu", else cuda
  TrainingArgs training;
};

class ControlBook {
 public:
  void Publish(ControlPlan plan);
  void Forget(const std::string& job);
  bool HasPlan(const std::string& job);

  StatusOr<WorkerAssignment> AssignmentFor(const std::string& job, const std::string& pod);
  // Records a report; true when it says something new (state or generation).
  bool Record(const WorkerReport& r);
  std::map<std::string, WorkerReport> Reports(const std::string& job);

 private:
  bool ReleasedLocked(const ControlPlan& p) const;  // mu_ held

  std::mutex mu_;
  std::map<std::string, ControlPlan> plans_;
  std::map<std::string, std::map<std::string, WorkerReport>> reports_;  // job -> pod -> newest
};

// Has the draining worker checkpointed the generation it was running?
bool DrainedBy(const DrainingRecord& d, const std::optional<WorkerReport>& newest);

}  // namespace easyscale::op
