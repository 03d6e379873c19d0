// File: easyscale/worker/est_worker.h
//
// One physical worker: hosts a subset of the job's ESTs and, every global step,
// runs them on the shared model (binding each EST's context; one after another,
// or side by side on a backend with several lanes),
// folds each micro-batch gradient into an exact fixed-point sum, sums across
// workers, and applies the same update everywhere.
//
//   auto w = EstWorker::Create(config, data, *comm);
//   ES_RETURN_IF_ERROR((*w)->Restore());
//   while (...) { auto s = (*w)->Step(stop_vote); ... }
//   ES_RETURN_IF_ERROR((*w)->Checkpoint());
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "easyscale/common/job_spec.h"
#include "easyscale/worker/collective.h"
#include "easyscale/worker/dataset.h"
#include "easyscale/worker/est_context.h"
#include "easyscale/worker/model.h"
#include "easyscale/worker/optimizer.h"

namespace easyscale {

struct WorkerConfig {
  TrainingArgs args;
  int total_ests = 1;
  std::vector<int> ests;  // hosted here, ascending
  std::string checkpoint_dir;
  EstField drop_field = EstField::kNone;  // test-only: forget this field on restore
  std::string backend = "cpu";            // cpu | cuda (a build with EASYSCALE_WITH_CUDA)
  int device = 0;                         // cuda: GPU ordinal, modulo the device count
  int64_t test_fault_step = -1;           // test-only: the backend fails during this step
  // Hosted ESTs side by side (KernelBackend::Lanes): 0 for the backend's
  // count; else at most the backend's, except that the CPU backend runs its
  // lanes in order and takes any count (tests: lanes change no bit).
  int lanes = 0;
};

// The kernels of a backend name: null for "cpu" (LayerContext's default);
// "cuda" (on GPU `device` modulo the count) when built with EASYSCALE_WITH_CUDA
// and a GPU is usable. The error names the backend and why it is unavailable.
StatusOr<std::unique_ptr<KernelBackend>> MakeKernelBackend(const std::string& backend,
                                                           int device = 0);

struct StepStats {
  int64_t step = 0;   // steps completed after this one
  float loss = 0.0f;  // mean over all ESTs (exact aggregation, same bits everywhere)
  bool stop = false;  // some worker voted to stop after this step
  double compute_seconds = 0.0;
  double allreduce_seconds = 0.0;
};

struct FinalResult {
  std::string digest;
  double test_accuracy = 0.0;
};

class EstWorker {
 public:
  static StatusOr<std::unique_ptr<EstWorker>> Create(const WorkerConfig& config,
                                                     const Dataset& data, Collective& comm);
  // Loads the newest complete checkpoint, or initialises step 0. Returns the step.
  StatusOr<int64_t> Restore();
  StatusOr<StepStats> Step(bool stop_vote);
  // All workers together: ESTs and job state to disk, then rank 0 commits.
  Status Checkpoint();
  int64_t step() const { return step_; }
  const WorkerConfig& config() const { return config_; }

  // Digest and held-out accuracy of a committed checkpoint (reads every EST).
  static StatusOr<FinalResult> Finalize(const WorkerConfig& config, const Dataset& data,
                                        int64_t step);

 private:
  EstWorker(const WorkerConfig& config, const Dataset& data, Collective& comm,
            std::unique_ptr<Model> model, std::unique_ptr<KernelBackend> kernels);
  std::string JobPayload() const;
  Status LoadJobPayload(const std::string& payload, const std::string& what);
  void NextSamples(EstContext& ctx, std::vector<uint32_t>* out);
  const std::vector<uint32_t>& Permutation(uint64_t epoch);
  std::string IdentityJson() const;
  std::string Digest(const std::vector<EstContext>& all) const;
  double Evaluate(const EstContext& est);
  KernelBackend& kernels() { return kernels_ ? *kernels_ : CpuKernelBackend(); }
  // Runs every hosted EST's forward and backward pass and folds its gradient
  // and loss into accum_, on the backend; accum_ and nonfinite_ are on the
  // host when it returns. Throws what the backend throws.
  void ComputeHostedEsts();
  // The hosted ESTs' BatchNorm buffers live on the backend between steps;
  // this brings them to the host (before saving them).
  void BuffersToHost();

  WorkerConfig config_;
  const Dataset& data_;
  Collective& comm_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KernelBackend> kernels_;
  std::unique_ptr<Optimizer> optimizer_;
  DataSplit split_;
  uint64_t shard_size_ = 0;
  std::map<int, EstContext> contexts_;
  std::map<uint64_t, std::vector<uint32_t>> permutations_;
  int64_t step_ = 0;
  int64_t last_checkpoint_ = -1;
  FixedTensor accum_;      // gradients, loss, stop vote
  IndexTensor nonfinite_;  // per hosted EST and accum_ segment: 1 if it held NaN or inf
  bool buffers_on_backend_ = false;
  // Where a step runs its hosted ESTs, side by side on a backend with several
  // lanes: each lane has its own step tensors, fixed-point sums and model for
  // activations and gradients. Lane 0 uses model_ and accum_; the others use
  // copies of the model, whose parameter values they copy from model_'s on the
  // backend every step, and sums added into accum_ after (exact, any order).
  struct Lane {
    std::unique_ptr<Model> replica;  // null on lane 0
    Tensor batch, dlogits, loss;
    IndexTensor labels;
    FixedTensor accum;  // empty on lane 0
  };
  void AddLane(std::unique_ptr<Model> replica);
  Model& ModelOf(Lane& lane) { return lane.replica ? *lane.replica : *model_; }
  FixedTensor& AccumOf(Lane& lane) { return lane.replica ? lane.accum : accum_; }
  std::vector<Lane> lanes_;
  std::vector<uint32_t> samples_;
};

}  // namespace easyscale
