// File: operator/src/controller/job_status.h
//
// The EasyScaleJob status the operator writes, and reads back as its own
// record after a restart or a leader change:
//   generation          newest worker generation; bumped whenever the worker set changes
//   runningGeneration   the newest generation told to Run
//   workers             members of `generation`: pod, node, gpuType, rank, ests
//   draining            workers of runningGeneration that must checkpoint before
//                       `generation` may run (with the assignment they hold)
//   restore             where the running generation took the job's state from
//                       (live workers that hold it, the durable checkpoint, or
//                       step 0), fixed when the generation is released
//   handover            drained workers of an earlier generation kept alive to
//                       serve the job's state to a generation with no
//                       worker of its own that holds it
//   restarts, restartAfter, failedGeneration  worker failures so far, the
//                       backoff's end, the last generation whose failure counted
//   failuresInARow      failures since a generation last trained a step: the
//                       backoff grows with these, the limit with restarts
//   phase, conditions (metav1.Condition), step, preemptions, scaleEvents,
//   speed (samples/s per GPU type, measured), digest, testAccuracy, output (the
//   trained model's folder and files' SHA-256s, from rank 0's final report),
//   certificate (the newest certified step and its digest, certificate_history.h),
//   observedGeneration, startTime, completionTime
//   progressPercentage  step / spec.training.steps, in whole percent
//   estimatedRemainingSeconds  to the last step at the measured step rate
//                       (step_rate.h); -1: unknown (no rate yet, suspended, ended)
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/control_protocol.h"
#include "easyscale/common/est_assignment.h"
#include "easyscale/common/status.h"

namespace easyscale::op {

struct WorkerRecord {
  std::string pod;
  std::string node;
  std::string gpuType;
  int rank = 0;
  std::vector<int> ests;
  bool operator==(const WorkerRecord&) const = default;
};

struct DrainingRecord {
  WorkerRecord worker;  // as it was in `generation`
  int64_t generation = 0;
  int worldSize = 1;
  std::string since;  // when it was asked to checkpoint
  bool operator==(const DrainingRecord&) const = default;
};

struct RestoreRecord {
  int64_t generation = 0;  // 0: none yet
  RestorePlan plan;
  std::string since;  // when the generation was released
  bool operator==(const RestoreRecord&) const = default;
};

// status.phase; the CRD lists the same names.
enum class JobPhase { kPending, kRunning, kScaling, kPreempted, kSuspended, kSucceeded, kFailed };
const char* PhaseName(JobPhase phase);
StatusOr<JobPhase> ParseJobPhase(const std::string& name, const std::string& path);
inline bool IsTerminal(JobPhase phase) {
  return phase == JobPhase::kSucceeded || phase == JobPhase::kFailed;
}

struct JobStatus {
  JobPhase phase = JobPhase::kPending;
  int64_t observedGeneration = 0;
  int64_t generation = 0;
  int64_t runningGeneration = 0;
  std::vector<WorkerRecord> workers;
  std::vector<DrainingRecord> draining;
  std::vector<DrainingRecord> handover;
  RestoreRecord restore;
  int restarts = 0;
  int failuresInARow = 0;
  std::string restartAfter;
  int64_t failedGeneration = 0;
  int64_t step = 0;
  int64_t preemptions = 0;
  int64_t scaleEvents = 0;
  std::map<std::string, double> speed;
  std::string digest;
  double testAccuracy = -1.0;
  OutputDigests output;     // the trained model's files (rank 0's report); path empty: none
  Certificate certificate;  // the newest stored in the history; step 0: none
  nlohmann::json conditions = nlohmann::json::array();
  std::string startTime;
  std::string completionTime;
  bool everPreempted = false;
  int progressPercentage = 0;
  int64_t estimatedRemainingSeconds = -1;
};

// Reads a status written by ToJson; malformed content is an error naming the field.
StatusOr<JobStatus> ParseJobStatus(const nlohmann::json& status);
nlohmann::json ToJson(const JobStatus& s);

// The EST assignment of `workers` in rank order.
EstAssignment AssignmentOf(int totalEsts, const std::vector<WorkerRecord>& workers);

// Sets a metav1.Condition; lastTransitionTime changes only with its status.
void SetCondition(nlohmann::json& conditions, const std::string& type, bool status,
                  const std::string& reason, const std::string& message,
                  int64_t observedGeneration);
const nlohmann::json* FindCondition(const nlohmann::json& conditions, const std::string& type);

}  // namespace easyscale::op
