// File: easyscale/common/control_protocol.h
//
// The versioned worker control protocol (HTTP + JSON) between the operator and
// each worker. The operator hands a worker its generation, rank, ESTs, peers'
// rendezvous and the training arguments (WorkerAssignment); the worker reports
// progress and acknowledges a generation once its ESTs are restored
// (WorkerReport). A worker acts on a new generation only at a step barrier.
//
//   GET  /v1/assignment?job=ns/name&pod=P   -> 200 WorkerAssignment of the job's
//        newest generation for pod P; 404 when P is in no generation (it exits)
//   POST /v1/report                          <- WorkerReport, answered 204
//
// Life of a generation g (the operator bumps g whenever the worker set changes):
//   1. Workers of g-1 poll once a step; seeing generation g they checkpoint at the
//      next step boundary (all ranks agree through the step's collective) and
//      report Checkpointed.
//   2. Until every worker of g-1 has reported Checkpointed or is gone, members of
//      g get action Wait; then Run: they rendezvous under `prefix`, restore the
//      newest checkpoint in checkpointDir, report Running, and train.
//   3. A worker told CheckpointAndStop, or sent SIGTERM, checkpoints at the next
//      step boundary with all its peers and reports Checkpointed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/job_spec.h"
#include "easyscale/common/status.h"

namespace easyscale {

inline constexpr const char* kControlApiVersion = "easyscale.io/control/v1";

// Where the workers of one generation meet to build their communicator.
struct Rendezvous {
  std::string store = "file";  // file | tcp
  std::string path;            // file: a folder all workers see
  std::string host;            // tcp
  int port = 0;                // tcp
  std::string prefix;          // unique per generation, e.g. "gen-7"
  bool operator==(const Rendezvous&) const = default;
};

enum class WorkerAction { kRun, kWait, kCheckpointAndStop };

struct WorkerAssignment {
  std::string job;         // namespace/name
  int64_t generation = 0;  // grows with every reconfiguration
  int rank = 0;
  int worldSize = 1;
  int totalEsts = 1;
  std::vector<int> ests;  // ascending EST ids this worker hosts
  Rendezvous rendezvous;
  std::string checkpointDir;
  std::string backend = "cpu";  // cpu | cuda
  TrainingArgs training;
  WorkerAction action = WorkerAction::kRun;
  // Checkpoint and stop after this global step; 0 = train to training.steps.
  int64_t stopAtStep = 0;
  bool operator==(const WorkerAssignment&) const = default;
};

enum class WorkerState { kStarting, kRestoring, kRunning, kCheckpointed, kSucceeded, kFailed };

struct WorkerReport {
  std::string job;
  std::string pod;
  int64_t generation = 0;
  int rank = 0;
  WorkerState state = WorkerState::kStarting;
  int64_t step = 0;
  double samplesPerSecond = 0.0;
  std::string digest;          // set when state is kSucceeded
  double testAccuracy = -1.0;  // set when state is kSucceeded
  std::string message;
  bool operator==(const WorkerReport&) const = default;
};

const char* ToString(WorkerState s);
const char* ToString(WorkerAction a);

nlohmann::json ToJson(const WorkerAssignment& a);
nlohmann::json ToJson(const WorkerReport& r);
// Both check apiVersion and every field; errors name the field.
StatusOr<WorkerAssignment> ParseWorkerAssignment(const nlohmann::json& j);
StatusOr<WorkerReport> ParseWorkerReport(const nlohmann::json& j);

}  // namespace easyscale
