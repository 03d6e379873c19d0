// File: worker/src/graph/program.h
//
// A loaded graph made ready to train: its ops, the values of one pass, which
// float initializers are parameters (they lead to the output through ops
// differentiable in them) and which are per-EST state (what an op's
// StateUpdates writes back: BatchNormalization's running statistics), and the
// reverse pass that derives every parameter's gradient from the ops' rules.
//
// Gradient order (the one reduction the runtime itself does): a value read by
// several nodes, or several times by one node, gets its gradient as the sum of
// their contributions added in ascending (node index, input index) order, left
// to right, in float. Nothing else is summed outside the ops.
//
//   ES_ASSIGN_OR_RETURN(auto p, Program::Create(std::move(graph)));
//   p->Input(0) = batch;                 // the data inputs, as graph.inputs
//   p->Forward(ctx);                     // outputs in p->Output(i)
//   p->Backward(ctx, 0, dlogits);        // gradients in p->Gradient(name)
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/op.h"

namespace easyscale::graph {

class Program {
 public:
  static StatusOr<std::unique_ptr<Program>> Create(Graph graph);

  const Graph& graph() const { return graph_; }
  // Parameters and state, by initializer name, in the order the nodes first
  // read them (a stable order the digest and the collectives rely on).
  const std::vector<std::string>& parameters() const { return parameters_; }
  const std::vector<std::string>& state() const { return state_; }

  Value& Input(size_t i) { return values_[inputs_[i]]; }
  const Value& Output(size_t i) const { return values_[outputs_[i]]; }
  // An initializer's value (a parameter's or state's current elements).
  Value& Initializer(const std::string& name) { return values_[ids_.at(name)]; }

  // OK when every node has a device half (RunContext::device can run the
  // program); else FailedPrecondition naming the first node without one.
  Status CheckRunsOnDevice() const;

  // Runs every node. In training, state outputs are written back into their
  // initializers after the pass. On a device (ctx.device), the first pass
  // there uploads the other initializers; parameters and state are the
  // caller's to place in Initializer(name).mirror before each pass.
  void Forward(RunContext& ctx);
  // After Forward: the gradient of every parameter for `doutput` (on the
  // device that ran Forward: in its mirror) as the gradient of output `output`.
  void Backward(RunContext& ctx, size_t output, Value doutput);
  const Value& Gradient(const std::string& parameter) const;
  // Where Backward leaves a parameter's gradient: it writes it there in place
  // (on a device: into the mirror), sized to the parameter if it is not, so a
  // caller may swap in the buffer it wants the gradient in, as it places the
  // parameters in Initializer(name).
  Value& GradientBuffer(const std::string& parameter) { return grads_[ids_.at(parameter)]; }
  // The bytes of every buffer the program keeps for values and gradients
  // (in use and spare, host and device): after a pass, the most its passes
  // needed at once.
  size_t BytesHeld() const;
  // The most bytes of values and gradients a pass has had in use at once (a
  // parameter's gradient buffer aside): what buffers packed without waste
  // would need, on any backend.
  size_t PeakBytesInUse() const { return peak_in_use_; }
  // The device memory the plan gives a training pass's values and gradients:
  // one arena, each request of the pass at an offset of its own, requests in
  // use at once never sharing bytes (requests rounded to 512 bytes).
  size_t ArenaBytes() const { return arena_bytes_; }
  // The arena's device memory (empty before the first pass on a device). No
  // value or gradient in it outlives a training pass, so from one pass's
  // Backward to the next Forward its bytes are free for the caller's use.
  std::span<std::byte> ArenaBetweenPasses() const {
    return {static_cast<std::byte*>(arena_.get()), arena_.bytes()};
  }
  // A zeroed float buffer of `shape` for a gradient (Backward's seed), from the
  // buffers the last pass let go where one fits, on ctx's device.
  Value TakeGradient(RunContext& ctx, const Shape& shape);

 private:
  explicit Program(Graph graph) : graph_(std::move(graph)) {}
  Status Compile();
  // A float initializer of the file's own (not one the loader made) may train.
  bool IsParameterCandidate(const std::string& name) const;
  // Sums the contributions to value `id` in the documented order into grads_[id].
  void Finish(RunContext& ctx, size_t id);
  // Marks omitted (kNone) each output an op may leave out that no node reads
  // and the graph does not return, and drops its elements.
  void LeaveOutUnreadOptionalOutputs();
  // The memory plan (after the ops are made): which computed values a pass
  // lets go, and after which step's forward or backward.
  void PlanMemory();
  // Where a pass asks for memory: a planned value's forward step, its
  // recomputation (j-th) before backward step n, input i's gradient at
  // backward step n, the seed. Each is asked once a training pass.
  struct Site {
    enum Kind { kValue, kRecompute, kGradient, kSeed } kind;
    size_t a = 0, b = 0;  // kValue: value id; kRecompute: n, j; kGradient: n, i
    bool operator<(const Site& o) const {
      return std::tie(kind, a, b) < std::tie(o.kind, o.a, o.b);
    }
  };
  // The arena plan: a dry training pass (no op runs, no memory is taken)
  // records when each site takes and lets go, then sites get offsets,
  // largest first, each at the lowest offset free for its lifetime.
  void PlanArena();
  // During the dry pass: notes v's site taking or letting go (v carries the
  // site in a memoryless mirror).
  void PlanTake(Value& v, const Site& site);
  void PlanFree(Value& v);
  // On a device: v's memory as its site's bytes of the arena (allocated on
  // first use), or for a site the plan does not know a spare of its size.
  void TakeDeviceMemory(RunContext& ctx, Value& v, const Site& site);
  bool IsArenaView(const DeviceMirror& m) const;
  // A zeroed gradient buffer of `shape` for `site`.
  Value TakeGradientAt(RunContext& ctx, const Shape& shape, const Site& site);
  // A spare buffer for `n` floats (moved out of spare_), or an empty Value.
  Value TakeSpare(RunContext& ctx, size_t n);
  // Parameter id's gradient buffer (GradientBuffer), zeroed, for its first
  // contribution.
  Value TakeParameterGradient(RunContext& ctx, size_t id);
  // Gives a planned value memory for its elements before its step runs.
  void Acquire(RunContext& ctx, Value& v, const Site& site);
  // Adds bytes taken for a value or gradient to in_use_ (and its peak).
  void CountTaken(size_t bytes);
  // Computes value `id` again by running step `producer`'s Forward.
  void Recompute(RunContext& ctx, size_t id, size_t producer, const Site& site);
  // Moves a value's memory (host and device) to spare_; its shape stays.
  void Release(Value& v);

  struct Step {
    std::unique_ptr<Op> op;
    std::vector<size_t> in, out;  // value ids; kNone for omitted
  };
  // Whether the reverse pass asks step s's op for input i's gradient.
  bool WantsGradient(const Step& s, size_t i) const;
  // The output of step s whose gradient becomes input i's as it is (the op's
  // GradientOfOutput), or kNone; `handed_on` holds the choices for s's
  // earlier inputs.
  size_t HandsOnGradient(const Step& s, size_t i, const std::vector<const Value*>& dout,
                         const std::vector<size_t>& handed_on) const;
  struct Contribution {
    size_t node, input;
    Value gradient;
  };
  static constexpr size_t kNone = static_cast<size_t>(-1);

  Graph graph_;
  std::map<std::string, size_t> ids_;
  std::vector<Value> values_;
  std::vector<Step> steps_;
  std::vector<size_t> inputs_, outputs_;
  std::vector<std::string> parameters_, state_;
  std::vector<bool> needs_grad_;  // by value id: a parameter, or computed from one
  std::vector<std::vector<Contribution>> contributions_;  // by value id, in one reverse pass
  std::vector<Value> grads_;                              // by value id
  std::vector<bool> has_grad_;
  // By value id, for a parameter: the {node, input} of the contribution
  // Finish starts the sum from, which the rule writes into the parameter's
  // gradient buffer; {kNone, kNone} for other values.
  std::vector<std::pair<size_t, size_t>> first_contribution_;
  // The memory plan. A value a step computes (float, not an output, not
  // running state) holds memory from its step's forward until the last
  // forward reader when no backward reads it (Op::BackwardReads*), else until
  // the backward of the first step reading it there; the runtime gives it
  // back to spare_ then, for the values and gradients still to come.
  std::vector<bool> planned_;                                // by value id
  std::vector<std::vector<size_t>> release_after_forward_;   // by step: value ids
  std::vector<std::vector<size_t>> release_after_backward_;  // by step: value ids
  // Values a Recomputable op makes from values kept for the whole pass: they
  // go after their last forward reader and are computed again before each
  // backward that reads them. By step: {value id, producing step}.
  std::vector<std::vector<std::pair<size_t, size_t>>> recompute_before_backward_;
  // Buffers of values and gradients no longer read, kept for the next ones:
  // a pass reuses memory instead of faulting in fresh pages (on a device, only
  // for a request the arena plan does not know).
  std::vector<Value> spare_;
  size_t in_use_ = 0, peak_in_use_ = 0;         // bytes of the values and gradients taken
  const KernelBackend* uploaded_to_ = nullptr;  // the device holding the initializers
  DeviceWorkspace workspace_;                   // the ops' transient device scratch
  // The arena plan: sites by index, their offsets, the arena's size; during
  // PlanArena the dry pass's events (take or let go, site index, bytes).
  struct PlanEvent {
    bool take;
    size_t site, bytes;
  };
  std::map<Site, size_t> site_ids_;
  std::vector<size_t> site_offsets_;
  size_t arena_bytes_ = 0;
  std::vector<PlanEvent>* planning_ = nullptr;
  DeviceMirror arena_;  // on a device: the arena
};

}  // namespace easyscale::graph
