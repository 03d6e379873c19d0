// File: easyscale/worker/worker_process.h
//
// One generation of one physical worker, as `easyscale-worker run` and the k8s
// mode execute it: meet the peers, restore the newest checkpoint, train until
// the generation's stop step (or until any worker votes to stop), checkpoint
// with all peers, and at the last step compute the digest.
//
// Rank 0 prints progress as JSON lines on stdout:
//   {"event":"step","generation":g,"step":s,"loss":x,"samples_per_s":y,"workers":P,...}
//   {"event":"stopping","step":s}                 before the hand-over checkpoint
//   {"event":"done","step":S,"digest":"<64 hex>","test_accuracy":a}
#pragma once

#include <functional>
#include <string>

#include "easyscale/common/control_protocol.h"
#include "easyscale/worker/dataset.h"
#include "easyscale/worker/est_context.h"
#include "easyscale/worker/est_worker.h"

namespace easyscale {

struct WorkerProcessOptions {
  std::string bind_host = "127.0.0.1";
  EstField drop_field = EstField::kNone;
  int64_t fault_step = -1;     // test-only: the backend fails during this step
  bool print_progress = true;  // only rank 0 prints
  // Polled once per step; true = this worker votes to stop after the step.
  std::function<bool()> stop_requested;
  // Called after every step (all ranks), e.g. to report to the operator.
  std::function<void(const StepStats&)> on_step;
  // Called once the generation's ESTs are restored.
  std::function<void(int64_t step)> on_restored;
};

struct WorkerOutcome {
  WorkerState state = WorkerState::kCheckpointed;  // kCheckpointed or kSucceeded
  int64_t step = 0;
  FinalResult result;  // when kSucceeded (rank 0)
};

StatusOr<WorkerOutcome> RunGeneration(const WorkerAssignment& a, const Dataset& data,
                                      const WorkerProcessOptions& options);

// Loads what the training arguments name: the digits file or a synthetic set.
StatusOr<Dataset> LoadTrainingData(const TrainingArgs& args, const std::string& data_path);

// Installs SIGTERM/SIGINT handlers that set a flag; returns the flag's reader.
std::function<bool()> InstallStopSignalHandlers();

}  // namespace easyscale
