#include "easyscale/worker/est_worker.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <span>

#include "absl/strings/str_join.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"
#include "easyscale/common/sha256.h"
#include "easyscale/worker/fixed_point.h"
#include "easyscale/worker/predict.h"
#if defined(EASYSCALE_WITH_CUDA)
#include "resident_backend.h"
#endif

namespace easyscale {
namespace {

// The fields in which two identities differ: "seed: the checkpoint's is 1,
// this job's is 2; ...".
std::string IdentityDifference(const std::string& checkpoint, const std::string& job) {
  const nlohmann::json theirs = nlohmann::json::parse(checkpoint, nullptr, false);
  const nlohmann::json ours = nlohmann::json::parse(job);
  if (!theirs.is_object()) return "unreadable identity " + checkpoint;
  std::vector<std::string> fields;
  for (const auto& [key, value] : ours.items()) {
    const auto it = theirs.find(key);
    if (it == theirs.end() || *it != value) {
      fields.push_back(absl::StrCat(key, ": the checkpoint's is ",
                                    it == theirs.end() ? "absent" : it->dump(), ", this job's is ",
                                    value.dump()));
    }
  }
  for (const auto& [key, value] : theirs.items()) {
    if (!ours.contains(key)) fields.push_back(key + ": this job has none");
  }
  return absl::StrJoin(fields, "; ");
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

StatusOr<std::unique_ptr<KernelBackend>> MakeKernelBackend(const std::string& backend,
                                                           [[maybe_unused]] int device) {
  if (backend == "cpu") return std::unique_ptr<KernelBackend>();
  if (backend == "cuda") {
#if defined(EASYSCALE_WITH_CUDA)
    return cuda::MakeResidentKernelBackend(device);
#else
    return absl::FailedPreconditionError("backend \"cuda\": this build has no CUDA backend");
#endif
  }
  return absl::InvalidArgumentError("backend \"" + backend + "\": want cpu or cuda");
}

StatusOr<std::unique_ptr<EstWorker>> EstWorker::Create(const WorkerConfig& config,
                                                       const Dataset& data, Collective& comm) {
  ES_RETURN_IF_ERROR(ValidateTrainingArgs(config.args, "training"));
  if (config.ests.empty()) return absl::InvalidArgumentError("worker hosts no EST");
  if (config.lanes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("lanes ", config.lanes, " is negative"));
  }
  for (int e : config.ests) {
    if (e < 0 || e >= config.total_ests) {
      return absl::InvalidArgumentError(
          absl::StrCat("EST ", e, " outside [0, ", config.total_ests, ")"));
    }
  }
  ES_ASSIGN_OR_RETURN(auto model,
                      LoadModel(config.args, data.shape, data.classes, config.args.batchPerEst));
  ES_RETURN_IF_ERROR(model->AcceptsData(data));
  ES_ASSIGN_OR_RETURN(auto kernels, MakeKernelBackend(config.backend, config.device));
  if (kernels != nullptr && kernels->OnDevice()) {
    if (Status s = model->CheckRunsOnDevice(); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("backend \"", config.backend, "\": ", s.message()));
    }
  }
  auto w = std::unique_ptr<EstWorker>(
      new EstWorker(config, data, comm, std::move(model), std::move(kernels)));
  int lanes = w->kernels().Lanes();
  if (config.lanes > 0) lanes = w->kernels_ ? std::min(config.lanes, lanes) : config.lanes;
  lanes = std::min<int>(lanes, static_cast<int>(config.ests.size()));
  while (static_cast<int>(w->lanes_.size()) < lanes) {
    ES_ASSIGN_OR_RETURN(auto replica,
                        LoadModel(config.args, data.shape, data.classes, config.args.batchPerEst));
    w->AddLane(std::move(replica));
  }
  if (w->shard_size_ < static_cast<uint64_t>(config.args.batchPerEst)) {
    return absl::InvalidArgumentError(
        absl::StrCat("training set of ", w->split_.train.size(), " samples is too small for ",
                     config.total_ests, " ESTs with batchPerEst ", config.args.batchPerEst));
  }
  return w;
}

EstWorker::EstWorker(const WorkerConfig& config, const Dataset& data, Collective& comm,
                     std::unique_ptr<Model> model, std::unique_ptr<KernelBackend> kernels)
    : config_(config),
      data_(data),
      comm_(comm),
      model_(std::move(model)),
      kernels_(std::move(kernels)) {
  optimizer_ = MakeOptimizer(config_.args, model_->params());
  update_on_backend_ = kernels_ != nullptr && kernels_->OnDevice() && comm_.size() == 1;
  split_ = SplitTrainTest(data_.count());
  shard_size_ = EstShardSize(split_, config_.total_ests);
  ByteWriter fresh;
  InitialEstContext(0, model_->InitialBuffers()).Save(fresh);
  context_bytes_ = fresh.bytes().size();
  context_words_ = (context_bytes_ + sizeof(int64_t) - 1) / sizeof(int64_t);
  accum_.Resize({static_cast<int>(model_->NumParamValues() + 2 +
                                  context_words_ * static_cast<size_t>(config_.total_ests))});
  nonfinite_.Resize(
      {static_cast<int>(config_.ests.size()), static_cast<int>(model_->params().size() + 1)});
  AddLane(nullptr);
}

void EstWorker::AddLane(std::unique_ptr<Model> replica) {
  Lane& lane = lanes_.emplace_back();
  lane.replica = std::move(replica);
  lane.loss.Resize({1});
}

void EstWorker::AccumulatePasses(int first, int count, FixedTensor& acc) {
  KernelBackend& k = kernels();
  std::vector<const float*> segments;
  std::vector<size_t> sizes;
  for (const Param* p : model_->params()) sizes.push_back(p->grad.size());
  sizes.push_back(1);  // the loss
  for (int hosted = first; hosted < first + count; ++hosted) {
    Lane& lane = lanes_[hosted % lanes_.size()];
    for (Param* p : ModelOf(lane).params()) segments.push_back(k.At(p->grad));
    segments.push_back(k.At(lane.loss));
  }
  k.AccumulateFixedPoint(segments, sizes, config_.total_ests, k.At(acc),
                         k.At(nonfinite_) + static_cast<size_t>(first) * sizes.size());
}

std::string EstWorker::IdentityJson() const {
  nlohmann::json id = ToJson(config_.args);
  id.erase("checkpointEvery");  // how often we save changes no bit
  id.erase("modelFile");        // where the model is: its bytes are what count
  id.erase("data");             // where the data is: dataSha256 holds its bytes
  if (const std::string model = model_->Fingerprint(); !model.empty()) id["modelSha256"] = model;
  id["totalEsts"] = config_.total_ests;
  id["dataSha256"] = data_.sha256;
  return id.dump();
}

std::string EstWorker::JobPayload() const {
  SyncStateToHost();
  ByteWriter w;
  w.Str(IdentityJson());
  w.I64(step_);
  for (const Param* p : model_->params()) w.TensorValue(p->value);
  optimizer_->Save(w);
  return w.Take();
}

Status EstWorker::LoadJobPayload(const std::string& payload, const std::string& what) {
  ByteReader r(payload, what);
  std::string identity;
  ES_RETURN_IF_ERROR(r.Str(&identity, "identity"));
  if (identity != IdentityJson()) {
    return absl::FailedPreconditionError(what + ": written by a different job configuration: " +
                                         IdentityDifference(identity, IdentityJson()));
  }
  ES_RETURN_IF_ERROR(r.I64(&step_, "step"));
  for (Param* p : model_->params()) ES_RETURN_IF_ERROR(r.TensorInto(&p->value, "parameter"));
  ES_RETURN_IF_ERROR(optimizer_->Load(r));
  if (!r.AtEnd()) return absl::DataLossError(what + ": trailing bytes after optimizer state");
  return absl::OkStatus();
}

void EstWorker::Initialize() {
  model_->InitParams(config_.args.seed);
  step_ = 0;
  contexts_.clear();
  replicas_.clear();
  buffers_on_backend_ = false;
  backend_state_current_ = false;
  host_state_current_ = true;
  for (int e = 0; e < config_.total_ests; ++e) {
    EstContext ctx = InitialEstContext(e, model_->InitialBuffers());
    ByteWriter w;
    ctx.Save(w);
    replicas_.emplace(e, w.Take());
    if (std::binary_search(config_.ests.begin(), config_.ests.end(), e)) {
      contexts_.emplace(e, std::move(ctx));
    }
  }
}

Status EstWorker::LoadContext(int id, const std::string& bytes, const std::string& what,
                              EstContext* ctx) const {
  *ctx = InitialEstContext(id, model_->InitialBuffers());
  ByteReader r(bytes, what + " EST " + std::to_string(id));
  ES_RETURN_IF_ERROR(ctx->Load(r));
  if (!r.AtEnd()) {
    return absl::DataLossError(absl::StrCat(what, ": trailing bytes after EST ", id, "'s context"));
  }
  return absl::OkStatus();
}

Status EstWorker::Restore(const TrainingSnapshot& snapshot, const std::string& what) {
  // Distinct ids whose least is 0 and greatest N-1: exactly the ESTs 0..N-1.
  if (static_cast<int>(snapshot.ests.size()) != config_.total_ests ||
      snapshot.ests.begin()->first != 0 ||
      snapshot.ests.rbegin()->first != config_.total_ests - 1) {
    return absl::DataLossError(absl::StrCat(what, ": holds ", snapshot.ests.size(),
                                            " EST contexts, the job has ", config_.total_ests));
  }
  ES_RETURN_IF_ERROR(LoadJobPayload(snapshot.job, what));
  // The loaded parameters and optimizer state are the host's; a failed load
  // leaves the flags, so a device's copy stays the state.
  host_state_current_ = true;
  backend_state_current_ = false;
  if (step_ != snapshot.step) {
    return absl::DataLossError(
        absl::StrCat(what, ": says step ", snapshot.step, " but its job state is at ", step_));
  }
  contexts_.clear();
  buffers_on_backend_ = false;
  for (int e : config_.ests) {
    EstContext ctx;
    ES_RETURN_IF_ERROR(LoadContext(e, snapshot.ests.at(e), what, &ctx));
    if (config_.hooks.after_restore) {
      config_.hooks.after_restore(ctx, InitialEstContext(e, model_->InitialBuffers()));
    }
    contexts_.emplace(e, std::move(ctx));
  }
  replicas_ = snapshot.ests;
  return absl::OkStatus();
}

TrainingSnapshot EstWorker::Snapshot() const {
  TrainingSnapshot s;
  s.step = step_;
  s.job = JobPayload();
  s.ests = replicas_;
  return s;
}

const std::vector<uint32_t>& EstWorker::Permutation(uint64_t epoch) {
  auto it = permutations_.find(epoch);
  if (it != permutations_.end()) return it->second;
  while (permutations_.size() >= 2) permutations_.erase(permutations_.begin());
  return permutations_[epoch] =
             EpochPermutation(config_.args.seed, epoch, static_cast<uint32_t>(split_.train.size()));
}

void EstWorker::NextSamples(int id, uint64_t* epoch, uint64_t* position,
                            std::vector<uint32_t>* out) {
  for (int i = 0; i < config_.args.batchPerEst; ++i) {
    if (*position == shard_size_) {
      ++*epoch;
      *position = 0;
    }
    // EST e's shard of the epoch is perm[e], perm[e + N], perm[e + 2N], ...
    const auto& perm = Permutation(*epoch);
    const uint64_t slot = static_cast<uint64_t>(id) + *position * config_.total_ests;
    out->push_back(split_.train[perm[slot]]);
    ++*position;
  }
}

void EstWorker::PrefetchComingSamples() {
  // This step's and the next step's samples of every hosted EST, from copies
  // of their cursors: the data pipeline decodes them while ESTs compute.
  std::vector<uint32_t> coming;
  for (const auto& [id, ctx] : contexts_) {
    uint64_t epoch = ctx.epoch, position = ctx.position;
    for (int step = 0; step < 2; ++step) NextSamples(id, &epoch, &position, &coming);
  }
  PrefetchSamples(data_, coming);
}

uint64_t EstWorker::MakeEstBatch(int id, const std::vector<uint32_t>& samples, uint64_t aug_counter,
                                 Tensor* x, std::vector<int32_t>* labels) const {
  PhiloxStream aug(AugmentationKey(config_.args.seed, id), aug_counter);
  MakeBatch(data_, samples, config_.args.augment ? &aug : nullptr, x, labels);
  aug.Sync();
  return aug.counter();
}

void EstWorker::TakeBatch(int id, EstContext& ctx, Lane& lane) {
  if (ahead_.id == id && ahead_.samples == samples_ && ahead_.aug_begin == ctx.aug_counter) {
    // The storage goes round: the lane's last batch becomes the next one made ahead.
    lane.batch.shape = ahead_.x.shape;
    lane.batch.data.swap(ahead_.x.data);
    lane.labels.data.swap(ahead_.labels);
    ctx.aug_counter = ahead_.aug_end;
    ahead_.id = -1;
    return;
  }
  ctx.aug_counter = MakeEstBatch(id, samples_, ctx.aug_counter, &lane.batch, &lane.labels.data);
}

void EstWorker::MakeBatchAhead() {
  // From a copy of the cursor, as the next step will move it; a scale event or
  // a roll-back before then changes the samples or the counter, and the next
  // step makes its own.
  const auto& [id, ctx] = *contexts_.begin();
  uint64_t epoch = ctx.epoch, position = ctx.position;
  ahead_.id = -1;
  ahead_.samples.clear();
  NextSamples(id, &epoch, &position, &ahead_.samples);
  try {
    ahead_.aug_end = MakeEstBatch(id, ahead_.samples, ctx.aug_counter, &ahead_.x, &ahead_.labels);
  } catch (const DataError&) {
    return;  // the next step meets the changed data itself, at its own step
  }
  ahead_.aug_begin = ctx.aug_counter;
  ahead_.id = id;
}

// The step's memory protocol: parameter values go to the backend at the start
// of a step when the host's are newer (after a restore, or every step when the
// optimizer runs on the host); with the update on the backend they and the
// optimizer state stay there, and only the loss comes back; the hosted
// ESTs' buffers stay on the backend from the first step after a restore, and
// on a device each EST's graph also copies them into one staging tensor that
// comes to the host with the sums (every step's collective carries them);
// activations and gradients are the backend's alone; the fixed-point sums
// come to the host once, at the end, unless the update runs on the backend.
void EstWorker::ComputeHostedEsts() {
  KernelBackend& k = kernels();
  const auto& params = model_->params();
  if (!backend_state_current_) {
    for (const Param* p : params) k.Upload(p->value);
    if (update_on_backend_) {
      for (const Tensor* t : optimizer_->StateTensors()) k.Upload(*t);
    }
    backend_state_current_ = true;
  }
  if (!buffers_on_backend_) {
    for (auto& [id, ctx] : contexts_) {
      for (const Tensor& b : ctx.buffers) k.Upload(b);
    }
    buffers_on_backend_ = true;
  }
  // Hosted pass h runs on lane h % lane_count, so the lanes' last passes are
  // the last `lanes` of the hosted, folded after the join; an earlier pass
  // (h + lane_count < hosted_count) folds in the pass, into its lane's own sums
  // (accum_ on lane 0): lane i has them where it runs two passes.
  const int hosted_count = static_cast<int>(contexts_.size());
  const int lane_count = static_cast<int>(lanes_.size());
  const int lanes = std::min(lane_count, hosted_count);
  const auto folds_in_pass = [&](int h) { return h + lane_count < hosted_count; };
  for (int i = 1; i < lane_count; ++i) {
    if (!folds_in_pass(i)) continue;
    lanes_[i].accum.Resize(accum_.shape);
    k.Zero(lanes_[i].accum.bytes(), k.At(lanes_[i].accum));
  }
  // The passes write lane 0's arena: accum_ leaves it until they are done.
  if (sums_in_arena_) accum_.mirror.Reset();
  sums_in_arena_ = false;
  // Lane 0 folds into accum_ during its passes only when it runs two; else
  // every sum comes after the join, and accum_ is made ready there.
  const bool sums_after_join = !folds_in_pass(0);
  if (!sums_after_join) k.Zero(accum_.bytes(), k.At(accum_));
  k.Zero(nonfinite_.bytes(), k.At(nonfinite_));
  size_t buffer_floats = 0;
  for (const Tensor& b : contexts_.begin()->second.buffers) buffer_floats += b.size();
  // On the CPU the buffers are the host's already.
  const bool staged = kernels_ != nullptr && buffer_floats > 0;
  if (staged) {
    buffer_staging_.Resize({static_cast<int>(buffer_floats * contexts_.size())});
  }
  int hosted = 0;
  if (data_.images) PrefetchComingSamples();
  const bool on_device = k.OnDevice();
  if (on_device) {
    // Replicas read the worker's parameters: on a device their tensors borrow
    // its memory (no copies, no memory of their own); on the host every pass
    // copies them.
    for (Lane& lane : lanes_) {
      if (!lane.replica) continue;
      for (size_t i = 0; i < params.size(); ++i) {
        lane.replica->params()[i]->value.mirror.Adopt(k.At(params[i]->value),
                                                      params[i]->value.bytes(), nullptr);
      }
    }
    pass_counters_.Resize({static_cast<int>(contexts_.size())});
    size_t slot = 0;
    for (auto& [id, ctx] : contexts_) pass_counters_.data[slot++] = ctx.dropout_counter;
    k.Upload(pass_counters_);
  }
  std::vector<uintptr_t> addresses;
  k.ForkLanes(lanes);
  for (auto& [id, ctx] : contexts_) {
    const int lane_index = hosted % lane_count;
    Lane& lane = lanes_[lane_index];
    Model& model = ModelOf(lane);
    k.UseLane(lane_index);
    if (config_.hooks.before_pass) config_.hooks.before_pass(step_, id, k);
    samples_.clear();
    NextSamples(id, &ctx.epoch, &ctx.position, &samples_);
    TakeBatch(id, ctx, lane);
    k.Upload(lane.batch);
    k.Upload(lane.labels);
    PassContext lc{true,
                   &ctx.buffers,
                   DropoutKey(config_.args.seed, id),
                   &ctx.dropout_counter,
                   &k,
                   on_device ? k.At(pass_counters_) + hosted : nullptr,
                   config_.profile_ops ? &op_times_ : nullptr};
    lc.op_times_by_node = config_.profile_by_node;
    // The EST's pass from its batch to its fixed-point sums, the same work on
    // the same memory every step: a device replays it once recorded.
    const auto pass = [&] {
      if (lane.replica && !on_device) {
        for (size_t i = 0; i < params.size(); ++i) {
          k.Copy(params[i]->value.bytes(), k.At(params[i]->value), k.At(model.params()[i]->value));
        }
      }
      const Tensor& logits = model.Forward(lane.batch, lc);
      lane.dlogits.Resize(logits.shape);
      k.SoftmaxCrossEntropy(logits.dim(0), logits.dim(1), k.At(logits), k.At(lane.labels),
                            k.At(lane.dlogits), k.At(lane.loss));
      model.Backward(lane.dlogits, lc);
      if (folds_in_pass(hosted)) AccumulatePasses(hosted, 1, AccumOf(lane));
      if (staged) {
        float* slot = k.At(buffer_staging_) + static_cast<size_t>(hosted) * buffer_floats;
        for (Tensor& b : ctx.buffers) {
          k.Copy(b.bytes(), k.At(b), slot);
          slot += b.size();
        }
      }
    };
    if (config_.profile_ops) {
      pass();
      ++hosted;
      continue;
    }
    if (on_device) {
      // What fixes the pass's work: the model (lane) and every tensor it touches.
      // The lanes side by side pick the kernels' tiles (cuda::SideBySideStreams).
      addresses = {
          reinterpret_cast<uintptr_t>(&model),
          static_cast<uintptr_t>(lane_index),
          static_cast<uintptr_t>(lanes),
          static_cast<uintptr_t>(hosted),
          reinterpret_cast<uintptr_t>(k.At(lane.batch)),
          reinterpret_cast<uintptr_t>(k.At(lane.labels)),
          reinterpret_cast<uintptr_t>(k.At(lane.dlogits)),
          reinterpret_cast<uintptr_t>(k.At(lane.loss)),
          reinterpret_cast<uintptr_t>(folds_in_pass(hosted) ? k.At(AccumOf(lane)) : nullptr),
          reinterpret_cast<uintptr_t>(k.At(nonfinite_)),
          reinterpret_cast<uintptr_t>(k.At(pass_counters_)),
          reinterpret_cast<uintptr_t>(staged ? k.At(buffer_staging_) : nullptr)};
      for (size_t i = 0; i < params.size(); ++i) {
        addresses.push_back(reinterpret_cast<uintptr_t>(k.At(params[i]->value)));
        addresses.push_back(reinterpret_cast<uintptr_t>(k.At(model.params()[i]->grad)));
      }
      for (Tensor& b : ctx.buffers) addresses.push_back(reinterpret_cast<uintptr_t>(k.At(b)));
    }
    const uint64_t counter = ctx.dropout_counter;
    if (k.RunRepeatable(static_cast<uint64_t>(id), addresses, pass)) {
      ctx.dropout_counter += pass_counter_advance_.at(id);  // what the recorded pass did
    } else {
      pass_counter_advance_[id] = ctx.dropout_counter - counter;
    }
    ++hosted;
  }
  MakeBatchAhead();
  k.JoinLanes();
  if (sums_after_join) {
    // Lane 0's arena is idle from here to the next step's passes, and the
    // sums are downloaded or read by the update before then: on a device
    // they take no memory of their own (8 bytes a parameter).
    const std::span<std::byte> idle = model_->DeviceMemoryIdleBetweenPasses();
    if (idle.size() >= accum_.bytes()) {
      accum_.mirror.Adopt(idle.data(), accum_.bytes(), nullptr);
      sums_in_arena_ = true;
    }
    k.Zero(accum_.bytes(), k.At(accum_));
  }
  if (lanes > 0) AccumulatePasses(hosted_count - lanes, lanes, accum_);  // one fold for all
  for (int i = 1; i < lane_count; ++i) {
    if (folds_in_pass(i)) k.AddFixedPointSums(accum_.size(), k.At(lanes_[i].accum), k.At(accum_));
  }
  if (update_on_backend_) {
    k.DownloadPart(accum_, model_->NumParamValues(), 1);  // the loss
  } else {
    k.Download(accum_);
  }
  k.Download(nonfinite_);
  if (!staged) return;
  k.Download(buffer_staging_);
  const float* slot = buffer_staging_.ptr();
  for (auto& [id, ctx] : contexts_) {
    for (Tensor& b : ctx.buffers) {
      std::memcpy(b.ptr(), slot, b.bytes());
      slot += b.size();
    }
  }
}

StatusOr<StepStats> EstWorker::Step(bool stop_vote) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& params = model_->params();
  const size_t n = model_->NumParamValues();
  try {  // a device backend throws on a device error; nothing is committed then
    ComputeHostedEsts();
  } catch (const DataError& e) {  // a data file changed under the job
    return absl::DataLossError(absl::StrCat("step ", step_, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(kernels().Name(), " backend failed at step ", step_, ": ", e.what()));
  }
  const size_t segments = params.size() + 1;
  int hosted = 0;
  for (const auto& [id, ctx] : contexts_) {
    for (size_t s = 0; s < segments; ++s) {
      if (nonfinite_.data[hosted * segments + s] == 0) continue;
      const std::string what = s < params.size() ? "gradient in " + params[s]->name : "loss";
      return absl::InternalError(absl::StrCat("non-finite ", what, " of EST ", id, " at step ",
                                              step_, ": training diverged"));
    }
    ++hosted;
  }
  accum_.data[n + 1] = stop_vote ? 1 : 0;
  PackHostedContexts();
  StepStats stats;
  stats.compute_seconds = Seconds(t0);
  const auto t1 = std::chrono::steady_clock::now();
  // With the update on the backend the gradients' sums stay there (no peer
  // adds to them): the collective carries the loss, the vote and the contexts.
  std::span<int64_t> carried(accum_.data);
  if (update_on_backend_) carried = carried.subspan(n);
  if (Status sum = comm_.AllreduceSum(carried); !sum.ok()) {
    ES_RETURN_IF_ERROR(RollBack());
    return sum;
  }
  stats.allreduce_seconds = Seconds(t1);
  UnpackContexts();
  KernelBackend& k = update_on_backend_ ? kernels() : CpuKernelBackend();
  try {
    // The sums' means decoded as the update reads them.
    optimizer_->Step(k, params, LearningRate(config_.args, step_), k.At(accum_),
                     config_.total_ests);
    k.Wait();
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(k.Name(), " backend failed updating step ", step_, ": ", e.what()));
  }
  if (update_on_backend_) {
    host_state_current_ = false;
  } else {
    backend_state_current_ = false;
  }
  ++step_;
  stats.step = step_;
  stats.loss = FixedPointMean(accum_.data[n], config_.total_ests);
  stats.stop = accum_.data[n + 1] > 0;
  return stats;
}

void EstWorker::PackHostedContexts() {
  const size_t base = model_->NumParamValues() + 2;
  for (const auto& [id, ctx] : contexts_) {
    ByteWriter w;
    ctx.Save(w);
    ES_CHECK(w.bytes().size() == context_bytes_) << "EST " << id << "'s context changed size";
    int64_t* slot = &accum_.data[base + static_cast<size_t>(id) * context_words_];
    std::fill(slot, slot + context_words_, 0);
    std::memcpy(slot, w.bytes().data(), context_bytes_);
  }
}

void EstWorker::UnpackContexts() {
  const size_t base = model_->NumParamValues() + 2;
  for (int e = 0; e < config_.total_ests; ++e) {
    const int64_t* slot = &accum_.data[base + static_cast<size_t>(e) * context_words_];
    replicas_[e].assign(reinterpret_cast<const char*>(slot), context_bytes_);
  }
}

void EstWorker::SyncStateToHost() const {
  if (host_state_current_) return;
  for (Param* p : model_->params()) kernels_->Download(p->value);
  for (Tensor* t : optimizer_->StateTensors()) kernels_->Download(*t);
  host_state_current_ = true;
}

Status EstWorker::RollBack() {
  buffers_on_backend_ = false;
  for (auto& [id, ctx] : contexts_) {
    ES_RETURN_IF_ERROR(LoadContext(id, replicas_.at(id), "replica", &ctx));
  }
  return absl::OkStatus();
}

std::string EstWorker::Digest() const {
  // Byte order (documented in README): "easyscale-digest-v1", step (u64), every
  // parameter tensor in model order, the optimizer state, then every EST context
  // in id order, each in the serialisation of serialize.h / est_context.h
  // (replicas_ holds every EST's context at step_ in exactly that form).
  SyncStateToHost();
  ByteWriter w;
  w.Str("easyscale-digest-v1");
  w.I64(step_);
  for (const Param* p : model_->params()) w.TensorValue(p->value);
  optimizer_->Save(w);
  Sha256 h;
  h.Update(w.bytes());
  for (const auto& [id, context] : replicas_) h.Update(context);
  return h.HexDigest();
}

Predictions EstWorker::Evaluate(const EstContext& est) {
  // Held-out predictions with EST 0's BatchNorm statistics, as a DDP job saves rank 0's.
  SyncStateToHost();  // Predict uploads the host's parameters
  std::vector<Tensor> buffers = est.buffers;
  return Predict(*model_, buffers, data_, split_.test, kernels());
}

StatusOr<TrainedModel> EstWorker::Trained() const {
  SyncStateToHost();
  TrainedModel m;
  m.step = step_;
  for (const Param* p : model_->params()) {
    m.parameters.push_back(
        {p->name, {p->value.shape.begin(), p->value.shape.end()}, p->value.data});
  }
  EstContext est0;
  ES_RETURN_IF_ERROR(LoadContext(0, replicas_.at(0), "the trained model's", &est0));
  const std::vector<std::string> names = model_->BufferNames();
  ES_CHECK(names.size() == est0.buffers.size()) << "buffer names and buffers differ in count";
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor& b = est0.buffers[i];
    m.buffers.push_back({names[i], {b.shape.begin(), b.shape.end()}, b.data});
  }
  if (config_.args.model == "file") {
    m.onnxPath = config_.args.modelFile;
    m.onnxSha256 = model_->Fingerprint();
  }
  return m;
}

StatusOr<FinalResult> EstWorker::Finalize(const WorkerConfig& config, const Dataset& data,
                                          const TrainingSnapshot& snapshot) {
  WorkerConfig all = config;
  all.ests.clear();
  for (int e = 0; e < config.total_ests; ++e) all.ests.push_back(e);
  all.hooks = {};
  auto no_peers = MakeSingleProcessCollective();
  ES_ASSIGN_OR_RETURN(auto reader, Create(all, data, *no_peers));
  ES_RETURN_IF_ERROR(reader->Restore(snapshot, "final state"));
  FinalResult result;
  result.digest = reader->Digest();
  try {
    Predictions test = reader->Evaluate(reader->contexts_.at(0));
    result.test_accuracy = test.accuracy;
    result.test_logits = std::move(test.logits);
  } catch (const DataError& e) {
    return absl::DataLossError(absl::StrCat("evaluation: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("evaluation failed: ", e.what()));
  }
  return result;
}

}  // namespace easyscale
