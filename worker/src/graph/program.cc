// Compiling a graph for training, the forward pass and the reverse pass.
#include "graph/program.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "easyscale/common/checks.h"
#include "graph/fusion.h"
#ifdef EASYSCALE_WITH_CUDA
#include "cuda_kernels.h"
#include "device_buffer.h"
#endif

namespace easyscale::graph {
namespace {

// A profiled pass's op times (RunContext::op_times), "<op> <direction>" (or
// "<node name> <direction>" with op_times_by_node): the host clock on the
// CPU; on a device, an event pair on the pass's stream per op, read when the
// pass ends (so a profiled pass waits for its work).
class OpTimer {
 public:
  OpTimer(RunContext& ctx, const char* direction) : ctx_(ctx), direction_(direction) {}
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;
  ~OpTimer() {
#ifdef EASYSCALE_WITH_CUDA
    for (auto& [op, events] : timed_) {
      float ms = 0.0f;
      if (cudaEventSynchronize(events.second) == cudaSuccess &&
          cudaEventElapsedTime(&ms, events.first, events.second) == cudaSuccess) {
        (*ctx_.op_times)[op + direction_] += ms;
      }
      cudaEventDestroy(events.first);
      cudaEventDestroy(events.second);
    }
#endif
  }

  // Runs `op_call` (node's op), timed when the pass is profiled.
  template <typename Call>
  void Run(const Node& node, Call&& op_call) {
    if (ctx_.op_times == nullptr) return op_call();
    const std::string& op = ctx_.op_times_by_node ? node.name : node.op;
#ifdef EASYSCALE_WITH_CUDA
    if (ctx_.device != nullptr) {
      const auto stream = static_cast<cudaStream_t>(ctx_.device->Stream());
      std::pair<cudaEvent_t, cudaEvent_t> events{};
      cuda::ThrowIfError(cudaEventCreate(&events.first), "profile event");
      cuda::ThrowIfError(cudaEventCreate(&events.second), "profile event");
      timed_.emplace_back(op, events);
      cuda::ThrowIfError(cudaEventRecord(events.first, stream), "profile event");
      op_call();
      cuda::ThrowIfError(cudaEventRecord(events.second, stream), "profile event");
      return;
    }
#endif
    const auto t0 = std::chrono::steady_clock::now();
    op_call();
    (*ctx_.op_times)[op + direction_] +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  RunContext& ctx_;
  std::string direction_;
#ifdef EASYSCALE_WITH_CUDA
  std::vector<std::pair<std::string, std::pair<cudaEvent_t, cudaEvent_t>>> timed_;
#endif
};

}  // namespace

StatusOr<std::unique_ptr<Program>> Program::Create(Graph graph) {
  auto p = std::unique_ptr<Program>(new Program(std::move(graph)));
  ES_RETURN_IF_ERROR(p->Compile());
  return p;
}

bool Program::IsParameterCandidate(const std::string& name) const {
  return graph_.initializers.count(name) != 0 && graph_.constants.count(name) == 0;
}

Status Program::Compile() {
  FuseGeluChains(graph_);
  FuseBatchNormActivations(graph_);
  FuseMatMulBiases(graph_);
  FuseTransposedWeights(graph_);
  FuseTransposedOperands(graph_);
  FuseScaledSoftmax(graph_);
  FuseSoftmaxDropouts(graph_);
  FuseDropoutAdds(graph_);
  for (const auto& [name, info] : graph_.values) {
    const size_t id = values_.size();
    ids_[name] = id;
    values_.emplace_back().Reset(info.dtype, info.shape);
  }
  auto id_of = [&](const std::string& name) -> StatusOr<size_t> {
    auto it = ids_.find(name);
    if (it == ids_.end()) return absl::InvalidArgumentError("value " + name + " has no shape");
    return it->second;
  };
  for (const auto& [name, c] : graph_.initializers) {
    ES_ASSIGN_OR_RETURN(const size_t id, id_of(name));
    Value& v = values_[id];
    if (c.shape != v.shape || c.dtype != v.dtype) {
      return absl::InvalidArgumentError("initializer " + name + " disagrees with its value info");
    }
    v.floats = c.floats;
    v.ints = c.ints;
  }
  for (const std::string& name : graph_.inputs) {
    ES_ASSIGN_OR_RETURN(const size_t id, id_of(name));
    inputs_.push_back(id);
  }
  for (const std::string& name : graph_.outputs) {
    ES_ASSIGN_OR_RETURN(const size_t id, id_of(name));
    outputs_.push_back(id);
  }
  if (outputs_.empty()) return absl::InvalidArgumentError("the graph has no output");

  for (const Node& node : graph_.nodes) {
    Step step;
    std::vector<OpInput> infos;
    for (const std::string& name : node.inputs) {
      if (name.empty()) {
        step.in.push_back(kNone);
        infos.emplace_back();
        continue;
      }
      ES_ASSIGN_OR_RETURN(const size_t id, id_of(name));
      step.in.push_back(id);
      auto c = graph_.initializers.find(name);
      infos.push_back(
          {&graph_.values.at(name), c == graph_.initializers.end() ? nullptr : &c->second});
    }
    for (const std::string& name : node.outputs) {
      if (name.empty()) {
        step.out.push_back(kNone);
        continue;
      }
      ES_ASSIGN_OR_RETURN(const size_t id, id_of(name));
      step.out.push_back(id);
    }
    ES_ASSIGN_OR_RETURN(step.op, MakeOp(node, graph_.opset, infos));
    steps_.push_back(std::move(step));
  }
  LeaveOutUnreadOptionalOutputs();

  // Which values need a gradient: float initializers read where an op is
  // differentiable, and what is computed from them.
  needs_grad_.assign(values_.size(), false);
  for (const Step& s : steps_) {
    bool flows = false;
    for (size_t i = 0; i < s.in.size(); ++i) {
      if (s.in[i] == kNone || !s.op->HasGradient(i)) continue;
      const std::string& name = graph_.nodes[&s - steps_.data()].inputs[i];
      if (IsParameterCandidate(name) && values_[s.in[i]].dtype == DType::kFloat32) {
        needs_grad_[s.in[i]] = true;
      }
      flows = flows || needs_grad_[s.in[i]];
    }
    for (size_t o : s.out) {
      if (flows && o != kNone && values_[o].dtype == DType::kFloat32) needs_grad_[o] = true;
    }
  }
  // Which of those the first output depends on: the parameters.
  std::vector<bool> leads(values_.size(), false);
  leads[outputs_[0]] = true;
  for (size_t n = steps_.size(); n-- > 0;) {
    const Step& s = steps_[n];
    if (std::none_of(s.out.begin(), s.out.end(),
                     [&](size_t o) { return o != kNone && leads[o]; })) {
      continue;
    }
    for (size_t i = 0; i < s.in.size(); ++i) {
      if (s.in[i] != kNone && s.op->HasGradient(i)) leads[s.in[i]] = true;
    }
  }
  std::vector<bool> listed(values_.size(), false);
  for (size_t n = 0; n < steps_.size(); ++n) {
    const Step& s = steps_[n];
    for (size_t i = 0; i < s.in.size(); ++i) {
      const size_t id = s.in[i];
      if (id == kNone || listed[id] || !needs_grad_[id] || !leads[id]) continue;
      if (!IsParameterCandidate(graph_.nodes[n].inputs[i])) continue;
      listed[id] = true;
      parameters_.push_back(graph_.nodes[n].inputs[i]);
    }
    for (const auto& [out, in] : s.op->StateUpdates()) {
      const std::string& name = graph_.nodes[n].inputs[in];
      if (graph_.initializers.count(name) == 0) {
        return absl::InvalidArgumentError("node " + graph_.nodes[n].name + ": running state " +
                                          name + " is not an initializer");
      }
      if (std::find(state_.begin(), state_.end(), name) == state_.end()) state_.push_back(name);
    }
  }
  for (const std::string& name : state_) {
    if (std::find(parameters_.begin(), parameters_.end(), name) != parameters_.end()) {
      return absl::InvalidArgumentError("initializer " + name + " is both a parameter and state");
    }
  }
  for (Step& s : steps_) {
    std::vector<bool> wanted(s.in.size(), false);
    for (size_t i = 0; i < s.in.size(); ++i) wanted[i] = WantsGradient(s, i);
    s.op->SetWantedGradients(wanted);
  }
  first_contribution_.assign(values_.size(), {kNone, kNone});
  for (const std::string& name : parameters_) {
    const size_t id = ids_.at(name);
    for (size_t n = 0; n < steps_.size() && first_contribution_[id].first == kNone; ++n) {
      for (size_t i = 0; i < steps_[n].in.size(); ++i) {
        if (steps_[n].in[i] != id || !WantsGradient(steps_[n], i)) continue;
        first_contribution_[id] = {n, i};
        break;
      }
    }
  }
  PlanMemory();
  contributions_.resize(values_.size());
  grads_.resize(values_.size());
  has_grad_.assign(values_.size(), false);
  PlanArena();
  return absl::OkStatus();
}

void Program::LeaveOutUnreadOptionalOutputs() {
  std::vector<bool> read(values_.size(), false);
  for (size_t id : outputs_) read[id] = true;
  for (const Step& s : steps_) {
    for (size_t id : s.in) {
      if (id != kNone) read[id] = true;
    }
  }
  for (Step& s : steps_) {
    const auto updates = s.op->StateUpdates();
    for (size_t o = 0; o < s.out.size(); ++o) {
      const size_t id = s.out[o];
      if (id == kNone || read[id] || !s.op->OutputOptional(o)) continue;
      if (std::any_of(updates.begin(), updates.end(), [&](const auto& u) { return u.first == o; }))
        continue;
      s.out[o] = kNone;
      values_[id].floats = std::vector<float>();
      values_[id].ints = std::vector<int64_t>();
    }
  }
}

void Program::PlanMemory() {
  std::vector<bool> kept(values_.size(), false);  // read after the pass
  for (size_t id : outputs_) kept[id] = true;
  for (const Step& s : steps_) {
    for (const auto& [o, i] : s.op->StateUpdates()) {
      if (s.out[o] != kNone) kept[s.out[o]] = true;
    }
  }
  // By value: the step computing it, the last step reading it forward, the
  // first (in program order, so the last to run in reverse) whose backward
  // reads it. Every reader comes after the producer.
  std::vector<size_t> producer(values_.size(), kNone), last_forward(values_.size(), kNone),
      first_backward(values_.size(), kNone);
  std::vector<std::vector<size_t>> backward_readers(values_.size());
  for (size_t n = 0; n < steps_.size(); ++n) {
    const Step& s = steps_[n];
    const auto read = [&](size_t id, bool backward) {
      last_forward[id] = n;
      if (backward && first_backward[id] == kNone) first_backward[id] = n;
      if (backward && (backward_readers[id].empty() || backward_readers[id].back() != n)) {
        backward_readers[id].push_back(n);
      }
    };
    for (size_t j = 0; j < s.out.size(); ++j) {
      if (s.out[j] == kNone) continue;
      producer[s.out[j]] = n;
      read(s.out[j], s.op->BackwardReadsOutput(j));
    }
    for (size_t i = 0; i < s.in.size(); ++i) {
      if (s.in[i] != kNone) read(s.in[i], s.op->BackwardReadsInput(i));
    }
  }
  // Whether value id is a Recomputable op's output made from values no step
  // computes (kept for the whole pass).
  const auto recomputable = [&](size_t id) {
    const Step& p = steps_[producer[id]];
    if (!p.op->Recomputable() || p.out.size() != 1) return false;
    return std::all_of(p.in.begin(), p.in.end(),
                       [&](size_t in) { return in == kNone || producer[in] == kNone; });
  };
  planned_.assign(values_.size(), false);
  release_after_forward_.assign(steps_.size(), {});
  release_after_backward_.assign(steps_.size(), {});
  recompute_before_backward_.assign(steps_.size(), {});
  for (size_t id = 0; id < values_.size(); ++id) {
    if (producer[id] == kNone || kept[id] || values_[id].dtype != DType::kFloat32) continue;
    planned_[id] = true;
    values_[id].floats = std::vector<float>();  // a pass takes its memory
    if (first_backward[id] == kNone) {
      release_after_forward_[last_forward[id]].push_back(id);
    } else if (recomputable(id)) {
      release_after_forward_[last_forward[id]].push_back(id);
      for (size_t n : backward_readers[id]) {
        recompute_before_backward_[n].push_back({id, producer[id]});
        release_after_backward_[n].push_back(id);
      }
    } else {
      release_after_backward_[first_backward[id]].push_back(id);
    }
  }
}

bool Program::WantsGradient(const Step& s, size_t i) const {
  return s.in[i] != kNone && needs_grad_[s.in[i]] && s.op->HasGradient(i);
}

size_t Program::HandsOnGradient(const Step& s, size_t i, const std::vector<const Value*>& dout,
                                const std::vector<size_t>& handed_on) const {
  const std::optional<size_t> j = s.op->GradientOfOutput(i);
  // A parameter's gradient is its own tensor, and an output's gradient goes
  // to one input at most (the sum of its contributions is made in place).
  if (!j || dout[*j] == nullptr || first_contribution_[s.in[i]].first != kNone ||
      std::find(handed_on.begin(), handed_on.end(), *j) != handed_on.end())
    return kNone;
  return *j;
}

void Program::Recompute(RunContext& ctx, size_t id, size_t producer, const Site& site) {
  Acquire(ctx, values_[id], site);
  if (planning_ != nullptr) return;
  const Step& p = steps_[producer];
  std::vector<const Value*> in;
  for (size_t i : p.in) in.push_back(i == kNone ? nullptr : &values_[i]);
  std::vector<Value*> out = {&values_[id]};
  p.op->Forward(ctx, in, out);
}

Value Program::TakeSpare(RunContext& ctx, size_t n) {
  // The smallest that fits (on a device, where the arena serves the planned
  // requests: of the same size, as device buffers are not resized), so that
  // each pass's same requests find theirs.
  const auto room = [&](const Value& v) {
    return ctx.device == nullptr ? v.floats.capacity() : v.mirror.bytes() / sizeof(float);
  };
  size_t best = spare_.size();
  for (size_t i = 0; i < spare_.size(); ++i) {
    const size_t r = room(spare_[i]);
    const bool fits = ctx.device == nullptr ? r >= n : r == n;
    if (fits && (best == spare_.size() || r < room(spare_[best]))) best = i;
  }
  Value v;
  if (best != spare_.size()) {
    v = std::move(spare_[best]);
    spare_[best] = std::move(spare_.back());
    spare_.pop_back();
  }
  return v;
}

void Program::Acquire(RunContext& ctx, Value& v, const Site& site) {
  if (planning_ != nullptr) return PlanTake(v, site);
  if (ctx.device != nullptr) {
    if (v.mirror.bytes() == v.bytes()) return;
    TakeDeviceMemory(ctx, v, site);
  } else {
    if (v.floats.size() == v.size()) return;
    v.floats = std::move(TakeSpare(ctx, v.size()).floats);
    v.floats.resize(v.size());  // its step writes every element, as it did last pass's
  }
  CountTaken(v.bytes());
}

void Program::CountTaken(size_t bytes) {
  in_use_ += bytes;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
}

void Program::Release(Value& v) {
  if (planning_ != nullptr) return PlanFree(v);
  Value freed;
  freed.floats = std::move(v.floats);
  v.floats = std::vector<float>();
  freed.mirror = std::move(v.mirror);  // swaps: v's is empty now
  if (freed.floats.capacity() == 0 && freed.mirror.bytes() == 0) return;
  in_use_ -= v.bytes();
  if (IsArenaView(freed.mirror)) return;  // the plan's bytes
  spare_.push_back(std::move(freed));
}

void Program::PlanTake(Value& v, const Site& site) {
  constexpr size_t kAlign = 512;  // every request on a boundary cudaMalloc would give it
  const size_t index = site_ids_.emplace(site, site_ids_.size()).first->second;
  planning_->push_back({true, index, (v.bytes() + kAlign - 1) / kAlign * kAlign});
  v.mirror.Adopt(reinterpret_cast<void*>(index + 1), v.bytes(), nullptr);
}

void Program::PlanFree(Value& v) {
  if (v.mirror.get() == nullptr) return;
  const size_t index = reinterpret_cast<uintptr_t>(v.mirror.get()) - 1;
  planning_->push_back({false, index, 0});
  v.mirror.Reset();
}

void Program::PlanArena() {
  std::vector<PlanEvent> events;
  planning_ = &events;
  RunContext dry;
  Forward(dry);
  Backward(dry, 0, TakeGradient(dry, values_[outputs_[0]].shape));
  planning_ = nullptr;
  // Nothing of the dry pass stays: no site's mark, no count, no gradient.
  for (std::vector<Value>* held : {&values_, &grads_}) {
    for (Value& v : *held) v.mirror.Reset();
  }
  std::fill(has_grad_.begin(), has_grad_.end(), false);
  in_use_ = peak_in_use_ = 0;
  // Each site's lifetime [first, last) in events, and its bytes.
  const size_t sites = site_ids_.size();
  std::vector<size_t> first(sites, kNone), last(sites, events.size()), bytes(sites, 0);
  for (size_t t = 0; t < events.size(); ++t) {
    const PlanEvent& e = events[t];
    ES_CHECK(e.take ? first[e.site] == kNone : last[e.site] == events.size())
        << "a pass's site taken or let go twice";
    (e.take ? first[e.site] : last[e.site]) = t;
    if (e.take) bytes[e.site] = e.bytes;
  }
  std::vector<size_t> order(sites);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return bytes[x] > bytes[y]; });
  site_offsets_.assign(sites, 0);
  arena_bytes_ = 0;
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of placed sites live at once
  for (size_t s : order) {
    busy.clear();
    for (size_t p : placed) {
      if (first[p] < last[s] && first[s] < last[p]) {
        busy.emplace_back(site_offsets_[p], site_offsets_[p] + bytes[p]);
      }
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + bytes[s] <= begin) break;
      offset = std::max(offset, end);
    }
    site_offsets_[s] = offset;
    arena_bytes_ = std::max(arena_bytes_, offset + bytes[s]);
    placed.push_back(s);
  }
}

void Program::TakeDeviceMemory(RunContext& ctx, Value& v, const Site& site) {
  const auto it = site_ids_.find(site);
  if (it == site_ids_.end()) {
    // Without a spare buffer of its size either, DeviceData allocates one.
    v.mirror = std::move(TakeSpare(ctx, v.size()).mirror);
    return;
  }
  if (arena_.bytes() != arena_bytes_) ctx.device->Address(nullptr, arena_bytes_, arena_);
  v.mirror.Adopt(static_cast<char*>(arena_.get()) + site_offsets_[it->second], v.bytes(), nullptr);
}

bool Program::IsArenaView(const DeviceMirror& m) const {
  const char* p = static_cast<const char*>(m.get());
  const char* base = static_cast<const char*>(arena_.get());
  return base != nullptr && p >= base && p < base + arena_.bytes();
}

Status Program::CheckRunsOnDevice() const {
  for (size_t n = 0; n < steps_.size(); ++n) {
    if (steps_[n].op->RunsOnDevice()) continue;
    const Node& node = graph_.nodes[n];
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", node.name, " (", node.op, ", opset ", graph_.opset,
        ") has no CUDA kernels in this configuration yet: train this model with --backend cpu"));
  }
  return absl::OkStatus();
}

void Program::Forward(RunContext& ctx) {
  ctx.workspace = &workspace_;
  if (ctx.device != nullptr && uploaded_to_ != ctx.device) {
    // The constants; parameters and state are the caller's (in their mirrors now).
    const auto callers = [&](const std::string& name) {
      return std::find(parameters_.begin(), parameters_.end(), name) != parameters_.end() ||
             std::find(state_.begin(), state_.end(), name) != state_.end();
    };
    for (const auto& [name, c] : graph_.initializers) {
      if (callers(name)) continue;
      const Value& v = values_[ids_.at(name)];
      ctx.device->UploadBytes(v.dtype == DType::kFloat32 ? static_cast<const void*>(v.floats.data())
                                                         : static_cast<const void*>(v.ints.data()),
                              v.bytes(), v.mirror);
    }
    uploaded_to_ = ctx.device;
  }
  std::vector<const Value*> in;
  std::vector<Value*> out;
  OpTimer timer(ctx, " forward");
  for (size_t n = 0; n < steps_.size(); ++n) {
    Step& s = steps_[n];
    in.clear();
    out.clear();
    for (size_t id : s.in) in.push_back(id == kNone ? nullptr : &values_[id]);
    for (size_t id : s.out) {
      if (id != kNone && planned_[id]) Acquire(ctx, values_[id], {Site::kValue, id, 0});
      out.push_back(id == kNone ? nullptr : &values_[id]);
    }
    if (planning_ == nullptr) timer.Run(graph_.nodes[n], [&] { s.op->Forward(ctx, in, out); });
    for (size_t id : release_after_forward_[n]) Release(values_[id]);
  }
  if (!ctx.training || planning_ != nullptr) return;
  for (const Step& s : steps_) {
    for (const auto& [o, i] : s.op->StateUpdates()) {
      if (s.out[o] == kNone) continue;
      const Value& updated = values_[s.out[o]];
      if (ctx.device == nullptr) {
        values_[s.in[i]].floats = updated.floats;
        continue;
      }
      ctx.device->Copy(updated.bytes(), DeviceData(ctx, updated),
                       DeviceData(ctx, values_[s.in[i]]));
    }
  }
}

void Program::Finish(RunContext& ctx, size_t id) {
  std::vector<Contribution>& parts = contributions_[id];
  has_grad_[id] = !parts.empty();
  if (parts.empty()) return;
  std::sort(parts.begin(), parts.end(), [](const Contribution& a, const Contribution& b) {
    return std::tie(a.node, a.input) < std::tie(b.node, b.input);
  });
  Value& g = grads_[id];
  g = std::move(parts[0].gradient);
  for (size_t k = 1; k < parts.size(); ++k) {
    Value& add = parts[k].gradient;
    if (ctx.device == nullptr) {
      for (size_t e = 0; e < g.floats.size(); ++e) g.floats[e] += add.floats[e];
    } else {
#ifdef EASYSCALE_WITH_CUDA
      float* sum = DeviceData(ctx, g);
      cuda::ThrowIfError(cuda::Add(g.size(), sum, DeviceData(ctx, add), sum,
                                   static_cast<cudaStream_t>(ctx.device->Stream())),
                         "gradient sum");
#endif
    }
    Release(add);
  }
  parts.clear();
}

Value Program::TakeGradient(RunContext& ctx, const Shape& shape) {
  return TakeGradientAt(ctx, shape, {Site::kSeed, 0, 0});
}

Value Program::TakeGradientAt(RunContext& ctx, const Shape& shape, const Site& site) {
  Value v;
  v.dtype = DType::kFloat32;
  v.shape = shape;
  if (planning_ != nullptr) {
    PlanTake(v, site);
  } else if (ctx.device == nullptr) {
    v.floats = std::move(TakeSpare(ctx, v.size()).floats);
    v.floats.assign(v.size(), 0.0f);
  } else {
    TakeDeviceMemory(ctx, v, site);
    ctx.device->Zero(v.bytes(), DeviceData(ctx, v));
  }
  return v;
}

Value Program::TakeParameterGradient(RunContext& ctx, size_t id) {
  Value v = std::move(grads_[id]);
  v.dtype = DType::kFloat32;
  v.shape = values_[id].shape;
  if (planning_ != nullptr) return v;
  if (ctx.device == nullptr) {
    v.floats.assign(v.size(), 0.0f);
  } else {
    ctx.device->Zero(v.bytes(), DeviceData(ctx, v));  // allocates it the first time
  }
  return v;
}

void Program::Backward(RunContext& ctx, size_t output, Value doutput) {
  ctx.workspace = &workspace_;
  std::fill(has_grad_.begin(), has_grad_.end(), false);
  for (auto& parts : contributions_) parts.clear();
  for (size_t id = 0; id < grads_.size(); ++id) {
    if (first_contribution_[id].first == kNone) Release(grads_[id]);
  }
  // The seed counts as a contribution after every node's (and is the
  // program's to let go from here on).
  CountTaken(doutput.bytes());
  contributions_[outputs_[output]].push_back({steps_.size(), 0, std::move(doutput)});
  std::vector<const Value*> in, out, dout;
  std::vector<Value*> din;
  std::vector<Value> owned;
  std::vector<size_t> handed_on;  // per input: the output whose gradient becomes its own
  OpTimer timer(ctx, " backward");
  for (size_t n = steps_.size(); n-- > 0;) {
    Step& s = steps_[n];
    dout.clear();
    bool any = false;
    for (size_t id : s.out) {
      if (id != kNone) Finish(ctx, id);  // every consumer of it comes later: all are in
      const bool has = id != kNone && has_grad_[id];
      dout.push_back(has ? &grads_[id] : nullptr);
      any = any || has;
    }
    in.clear();
    out.clear();
    din.assign(s.in.size(), nullptr);
    owned.clear();
    owned.resize(s.in.size());
    handed_on.assign(s.in.size(), kNone);
    bool wanted = false;
    for (size_t i = 0; any && i < s.in.size(); ++i) {
      const size_t id = s.in[i];
      in.push_back(id == kNone ? nullptr : &values_[id]);
      if (!WantsGradient(s, i)) continue;
      if (const size_t j = HandsOnGradient(s, i, dout, handed_on); j != kNone) {
        handed_on[i] = j;
        continue;
      }
      if (first_contribution_[id] == std::pair(n, i)) {
        owned[i] = TakeParameterGradient(ctx, id);
      } else {
        owned[i] = TakeGradientAt(ctx, values_[id].shape, {Site::kGradient, n, i});
        CountTaken(owned[i].bytes());
      }
      din[i] = &owned[i];
      wanted = true;
    }
    if (wanted) {
      for (size_t j = 0; j < recompute_before_backward_[n].size(); ++j) {
        const auto& [id, producer] = recompute_before_backward_[n][j];
        Recompute(ctx, id, producer, {Site::kRecompute, n, j});
      }
      for (size_t id : s.out) out.push_back(id == kNone ? nullptr : &values_[id]);
      if (planning_ == nullptr) {
        timer.Run(graph_.nodes[n], [&] { s.op->Backward(ctx, in, out, dout, din); });
      }
      for (size_t i = 0; i < s.in.size(); ++i) {
        if (din[i] != nullptr) contributions_[s.in[i]].push_back({n, i, std::move(owned[i])});
      }
    }
    // After the rule, which may read them: output gradients handed on become
    // their inputs' contributions (nothing else reads them).
    for (size_t i = 0; i < s.in.size(); ++i) {
      if (handed_on[i] == kNone) continue;
      const size_t from = s.out[handed_on[i]];
      Value g = std::move(grads_[from]);
      has_grad_[from] = false;
      g.shape = values_[s.in[i]].shape;
      contributions_[s.in[i]].push_back({n, i, std::move(g)});
    }
    // Only this node's rule reads its outputs' gradients (a node's output is
    // never a parameter), and no rule still to run reads the values planned
    // to go here: their buffers serve the requests still to come.
    for (size_t id : s.out) {
      if (id == kNone || !has_grad_[id]) continue;
      Release(grads_[id]);
      has_grad_[id] = false;
    }
    for (size_t id : release_after_backward_[n]) Release(values_[id]);
  }
  for (const std::string& name : parameters_) Finish(ctx, ids_.at(name));
}

size_t Program::BytesHeld() const {
  size_t bytes = 0;
  for (const std::vector<Value>* held : {&values_, &grads_, &spare_}) {
    for (const Value& v : *held) {
      bytes += v.floats.capacity() * sizeof(float) + v.ints.capacity() * sizeof(int64_t) +
               (IsArenaView(v.mirror) ? 0 : v.mirror.bytes());
    }
  }
  return bytes + arena_.bytes();
}

const Value& Program::Gradient(const std::string& parameter) const {
  const size_t id = ids_.at(parameter);
  ES_CHECK(has_grad_[id]) << "parameter " << parameter << " got no gradient in this pass";
  return grads_[id];
}

}  // namespace easyscale::graph
