// File: easyscale/worker/est_worker.h
//
// One physical worker: hosts a subset of the job's ESTs and, every global step,
// runs them on the shared model (binding each EST's context; one after another,
// or side by side on a backend with several lanes),
// folds each micro-batch gradient into an exact fixed-point sum, sums across
// workers, and applies the same update everywhere. The same collective carries
// every hosted EST's context after the step, so every worker ends each step
// holding the whole job's state (Snapshot): a survivor can hand any EST on.
//
//   auto w = EstWorker::Create(config, data, *comm);
//   snapshot ? ES_RETURN_IF_ERROR((*w)->Restore(*snapshot, "peer")) : (*w)->Initialize();
//   while (...) { auto s = (*w)->Step(stop_vote); ... }
//   TrainingSnapshot state = (*w)->Snapshot();
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "easyscale/common/job_spec.h"
#include "easyscale/worker/collective.h"
#include "easyscale/worker/dataset.h"
#include "easyscale/worker/est_context.h"
#include "easyscale/worker/model.h"
#include "easyscale/worker/model_output.h"
#include "easyscale/worker/optimizer.h"
#include "easyscale/worker/predict.h"
#include "easyscale/worker/snapshot.h"

namespace easyscale {

// Points where a caller steps into a worker's training (e.g. the test worker
// binary's faults and forgotten context fields); an empty one does nothing.
struct WorkerHooks {
  // Before each hosted EST's forward and backward pass of `step` (steps done
  // so far), on the backend that runs it; what it throws fails the step.
  std::function<void(int64_t step, int est, KernelBackend& backend)> before_pass;
  // On each EST context Restore loads, with a fresh context of the same EST.
  std::function<void(EstContext& restored, const EstContext& fresh)> after_restore;
};

struct WorkerConfig {
  TrainingArgs args;
  int total_ests = 1;
  std::vector<int> ests;        // hosted here, ascending
  std::string backend = "cpu";  // cpu | cuda (a build with EASYSCALE_WITH_CUDA)
  int device = 0;               // cuda: GPU ordinal, modulo the device count
  // Hosted ESTs side by side (KernelBackend::Lanes): 0 for the backend's
  // count; else at most the backend's, except that the CPU backend runs its
  // lanes in order and takes any count (tests: lanes change no bit).
  int lanes = 0;
  // Benchmarks: every pass runs its ops one by one (no replay) and adds their
  // times to op_times() (a device waits for each pass).
  bool profile_ops = false;
  bool profile_by_node = false;  // with profile_ops: each node's time, not each op type's
  WorkerHooks hooks;
};

// The kernels of a backend name: null for "cpu" (PassContext's default);
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
  std::vector<float> test_logits;  // [held-out samples, classes] (predict.h)
};

class EstWorker {
 public:
  static StatusOr<std::unique_ptr<EstWorker>> Create(const WorkerConfig& config,
                                                     const Dataset& data, Collective& comm);
  // Step 0: parameters from the seed, every EST's context fresh.
  void Initialize();
  // The state of `snapshot` (`what` names where it came from in errors): it
  // must be this job's (same identity) and hold every EST of the job.
  Status Restore(const TrainingSnapshot& snapshot, const std::string& what);
  // One global step. When the collective fails (a peer is gone) it returns
  // Unavailable with the state back at step(): nothing of the step is kept.
  StatusOr<StepStats> Step(bool stop_vote);
  // The whole job at step(): parameters, optimizer state and every EST's
  // context (this worker's own and the replicas the last step brought).
  TrainingSnapshot Snapshot() const;
  int64_t step() const { return step_; }
  // SHA-256 of the whole job at step() (README "Digest": parameters, optimizer
  // state, every EST's context): a function of the logical training state
  // only, the same on every worker of every run that reached this step.
  std::string Digest() const;
  // With config.profile_ops: the ops' times summed over every pass so far.
  OpTimes& op_times() { return op_times_; }
  // Its backend's KernelBackend::PeakDeviceBytes().
  size_t PeakDeviceBytes() { return kernels().PeakDeviceBytes(); }
  // Its model's Model::PeakBytesInUse() (lane 0's; each lane's replica has
  // its own).
  size_t PeakBytesInUse() const { return model_->PeakBytesInUse(); }
  const WorkerConfig& config() const { return config_; }
  // The trained model at step(), for model_output.h: the parameters, EST 0's
  // buffers (its context as the last step left it) and the model's file.
  StatusOr<TrainedModel> Trained() const;

  // Digest and held-out accuracy of the job's state in `snapshot`.
  static StatusOr<FinalResult> Finalize(const WorkerConfig& config, const Dataset& data,
                                        const TrainingSnapshot& snapshot);

 private:
  EstWorker(const WorkerConfig& config, const Dataset& data, Collective& comm,
            std::unique_ptr<Model> model, std::unique_ptr<KernelBackend> kernels);
  std::string JobPayload() const;
  Status LoadJobPayload(const std::string& payload, const std::string& what);
  // Appends EST `id`'s next micro-batch of samples and advances its cursor.
  void NextSamples(int id, uint64_t* epoch, uint64_t* position, std::vector<uint32_t>* out);
  void PrefetchComingSamples();
  // EST id's micro-batch of `samples`, augmented from counter aug_counter;
  // returns the counter after it.
  uint64_t MakeEstBatch(int id, const std::vector<uint32_t>& samples, uint64_t aug_counter,
                        Tensor* x, std::vector<int32_t>* labels) const;
  // Makes the first hosted EST's next micro-batch once this step's passes are
  // queued: on a device it overlaps them (a batch of 224x224 images takes
  // milliseconds to assemble); on the CPU it is the same work moved, and the
  // CPU tests (a roll-back) check that a batch made ahead is used only when
  // it is the batch asked for.
  void MakeBatchAhead();
  const std::vector<uint32_t>& Permutation(uint64_t epoch);
  std::string IdentityJson() const;
  Predictions Evaluate(const EstContext& est);
  KernelBackend& kernels() { return kernels_ ? *kernels_ : CpuKernelBackend(); }
  // Runs every hosted EST's forward and backward pass and folds its gradient
  // and loss into accum_, on the backend; nonfinite_ and accum_ (from the loss
  // on, when the update runs on the backend) are on the host when it returns.
  // Throws what the backend throws.
  void ComputeHostedEsts();
  // Brings the parameters and the optimizer state home from the backend when
  // the last update ran there (they are read on the host only for snapshots,
  // digests and outputs). Throws what the backend throws.
  void SyncStateToHost() const;
  // Writes each hosted EST's context into its slot of the step's collective
  // (the slots of other ESTs stay zero, so the sum is a gather), and after the
  // sum takes every EST's context from its slot.
  void PackHostedContexts();
  void UnpackContexts();
  // Back to the contexts of step_ after a failed step.
  Status RollBack();
  Status LoadContext(int id, const std::string& bytes, const std::string& what,
                     EstContext* ctx) const;

  WorkerConfig config_;
  const Dataset& data_;
  Collective& comm_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KernelBackend> kernels_;
  std::unique_ptr<Optimizer> optimizer_;
  DataSplit split_;
  uint64_t shard_size_ = 0;
  std::map<int, EstContext> contexts_;
  // Every EST's serialised context at step_ (hosted or not), and where the
  // collective carries them: context_words_ int64 words per EST after the
  // gradients, loss and stop vote.
  std::map<int, std::string> replicas_;
  size_t context_bytes_ = 0;
  size_t context_words_ = 0;
  std::map<uint64_t, std::vector<uint32_t>> permutations_;
  int64_t step_ = 0;
  FixedTensor accum_;  // gradients, loss, stop vote, EST contexts
  // Whether accum_'s device memory is lane 0's arena (the step folded every
  // sum after its passes), not its own.
  bool sums_in_arena_ = false;
  IndexTensor nonfinite_;  // per hosted EST and accum_ segment: 1 if it held NaN or inf
  bool buffers_on_backend_ = false;
  // Where the step's update runs: on a device backend when no peer takes part
  // in the sums (one worker), so parameters, optimizer state and sums stay in
  // device memory; else on the host after the collective.
  bool update_on_backend_ = false;
  // Whether the backend's copy of the parameters (and, with update_on_backend_,
  // of the optimizer state) is step_'s, and whether the host's is.
  bool backend_state_current_ = false;
  mutable bool host_state_current_ = true;
  Tensor buffer_staging_;  // a device's copy of the hosted ESTs' buffers, one download a step
  // On a device: each hosted EST's dropout counter at its pass's start (where a
  // replayed pass reads it), and how far one pass of each EST moves it.
  TensorOf<uint64_t> pass_counters_;
  OpTimes op_times_;
  std::map<int, uint64_t> pass_counter_advance_;
  // Where a step runs its hosted ESTs, side by side on a backend with several
  // lanes: each lane has its own step tensors and model for activations and
  // gradients. Lane 0 uses model_; the others use copies of the model, whose
  // parameters read model_'s memory on a device and are copied from model_'s
  // every pass on the host. A
  // lane's last pass of the step leaves its gradients in its model, folded
  // into accum_ after the lanes join; its earlier passes (more ESTs than lanes)
  // fold theirs into the lane's own sums in the pass, added into accum_ after
  // too (fixed-point sums: exact, any order).
  struct Lane {
    std::unique_ptr<Model> replica;  // null on lane 0
    Tensor batch, dlogits, loss;
    IndexTensor labels;
    FixedTensor accum;  // empty on lane 0, and until a step runs two passes here
  };
  void AddLane(std::unique_ptr<Model> replica);
  Model& ModelOf(Lane& lane) { return lane.replica ? *lane.replica : *model_; }
  FixedTensor& AccumOf(Lane& lane) { return lane.replica ? lane.accum : accum_; }
  // Folds hosted passes first .. first + count - 1 (each left in its lane's
  // model and loss) into `acc` in one call, their nonfinite flags at their slots.
  void AccumulatePasses(int first, int count, FixedTensor& acc);
  // The lane's micro-batch of EST id for samples_ (advancing its augmentation
  // counter): the one made ahead when it is that batch, else made now.
  void TakeBatch(int id, EstContext& ctx, Lane& lane);
  std::vector<Lane> lanes_;
  std::vector<uint32_t> samples_;
  // A micro-batch made ahead: EST id's for `samples` from augmentation counter
  // aug_begin (a batch is a function of these alone), the counter after it.
  struct BatchAhead {
    int id = -1;  // none
    std::vector<uint32_t> samples;
    uint64_t aug_begin = 0, aug_end = 0;
    Tensor x;
    std::vector<int32_t> labels;
  };
  BatchAhead ahead_;
};

}  // namespace easyscale
