// File: easyscale/worker/worker_process.h
//
// One generation of one physical worker, as `easyscale-worker run` and the k8s
// mode execute it: meet the peers, restore the job's state, train until the
// generation's stop step (or until any worker votes to stop), and end holding
// the whole job's state (every worker does: each step replicates every EST's
// context), from which rank 0 writes durable checkpoints and, at the last
// step, computes the digest and writes the trained model (model_output.h).
//
// Rank 0 prints progress as JSON lines on stdout:
//   {"event":"step","ts":unix seconds,"generation":g,"step":s,"loss":x,"samples_per_s":y,...}
//   {"event":"certificate","step":s,"digest":"<64 hex>"}   with certificateEvery K, after
//        every step that is a multiple of K: the digest of the whole job's state
//        (control_protocol.h Certificate)
//   {"event":"stopping","step":s}                 the generation ends before the last step
//   {"event":"output","step":s,"path":dir,"onnxSha256":h,"safetensorsSha256":h}
//        the trained model written (model_output.h): at the end into the output
//        path, with everyCheckpoint also at each checkpoint into <path>/step-<s>
//   {"event":"done","step":S,"digest":"<64 hex>","test_accuracy":a}
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "easyscale/common/control_protocol.h"
#include "easyscale/worker/dataset.h"
#include "easyscale/worker/est_worker.h"
#include "easyscale/worker/snapshot.h"

namespace easyscale {

struct WorkerProcessOptions {
  std::string bind_host = "127.0.0.1";
  std::string token;  // the job's control token (rendezvous store)
  std::chrono::milliseconds collective_timeout{60000};
  bool print_progress = true;  // only rank 0 prints
  WorkerHooks hooks;           // the worker's (est_worker.h)
  // Polled once per step; true = this worker votes to stop after the step.
  std::function<bool()> stop_requested;
  // Called after every step (all ranks), e.g. to report to the operator.
  std::function<void(const StepStats&)> on_step;
  // Rank 0, before on_step of each certified step (assignment's certificateEvery).
  std::function<void(const Certificate&)> on_certificate;
  // Called once the generation's state is restored and its peers met.
  std::function<void(int64_t step)> on_restored;
};

struct WorkerOutcome {
  WorkerState state = WorkerState::kCheckpointed;  // kCheckpointed or kSucceeded
  int64_t step = 0;
  TrainingSnapshot snapshot;  // the whole job at `step`
  FinalResult result;         // when kSucceeded (rank 0)
  OutputDigests output;       // when kSucceeded (rank 0 with an output path): the model's files
  // Not OK when a peer was lost mid-step: the step was rolled back and
  // `snapshot` is the last completed one.
  Status interrupted;
};

// Runs generation `a` from `start` (nothing: step 0). Errors: Unavailable when
// the peers cannot be met; what the backend or a bad state gives otherwise.
StatusOr<WorkerOutcome> RunGeneration(const WorkerAssignment& a, const Dataset& data,
                                      const std::optional<TrainingSnapshot>& start,
                                      const WorkerProcessOptions& options);

// The newest restorable checkpoint in `dir`; nothing when it holds none.
StatusOr<std::optional<TrainingSnapshot>> LoadNewestCheckpoint(const std::string& dir,
                                                               int total_ests);

// Loads what the training arguments name: users' data (args.data), the
// digits (from `digits_file`) or a generated set, normalised as they say.
StatusOr<Dataset> LoadTrainingData(const TrainingArgs& args, const std::string& digits_file);

// True for errors retrying cannot help: bad input, a corrupt or missing file.
// A worker exits with kPermanentExitCode on them.
bool IsPermanentWorkerError(const Status& s);

// Installs SIGTERM/SIGINT handlers that set a flag; returns the flag's reader.
std::function<bool()> InstallStopSignalHandlers();

}  // namespace easyscale
