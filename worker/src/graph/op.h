// File: worker/src/graph/op.h
//
// One graph operator, as the graph runtime runs it: its forward computation
// and its gradient rule, on the CPU, each in one documented operation order
// (the comment at the top of the op's file says it), so results are the same
// bits whatever runs them. Ops live one per file in ops/, named for the ONNX
// operator; MakeOp (registry.cc) builds the one a node names.
//
//   ES_ASSIGN_OR_RETURN(std::unique_ptr<Op> op, MakeOp(node, graph.opset, inputs));
//   std::vector<ValueInfo> infos = op->OutputInfos();  // the loader's shape inference
//   op->Forward(ctx, inputs, outputs);            // outputs Reset to those infos
//   op->Backward(ctx, inputs, outputs, dout, din);  // din[i] set where asked
//
// Rules every op keeps (kernel_formulas.h has the shared ones): no reduction
// whose order depends on threads or data; fma only where the formula spells it
// out; transcendentals from detmath.h (the project's own exp, log, erf, tanh,
// pow from basic IEEE operations), never <cmath>'s, so a CUDA twin can match.
//
// Device halves: an op with CUDA kernels (in ops/<op>.cu, beside its file)
// says so with RunsOnDevice and hands a pass that runs on a device
// (RunContext::device) to its device half with ES_RUN_ON_DEVICE; the device
// half runs the same operation order per output on the values' device
// elements (DeviceData).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/worker/backend.h"
#include "easyscale/worker/graph.h"
#include "easyscale/worker/philox.h"

namespace easyscale::graph {

// A value while a graph runs: its dtype, shape and elements (floats for
// kFloat32, ints for kInt64 and kBool), row-major.
struct Value {
  DType dtype = DType::kFloat32;
  Shape shape;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  // The elements in a device's memory while a device runs the graph; the host
  // vectors are then not read.
  mutable DeviceMirror mirror;

  // Sets dtype and shape and sizes the elements (zeroed).
  void Reset(DType t, Shape s);
  size_t size() const { return static_cast<size_t>(NumElements(shape)); }
  size_t bytes() const {
    return size() * (dtype == DType::kFloat32 ? sizeof(float) : sizeof(int64_t));
  }
};

// Device memory that an op uses within one call only, in slots it numbers
// itself: the ops of a program run one after another on one stream, so they
// share it (Program hands its own to every pass).
struct DeviceWorkspace {
  static constexpr int kSlots = 4;
  DeviceMirror slots[kSlots];
};

// What one pass sees of the EST that runs it.
struct RunContext {
  bool training = true;
  PhiloxKey dropout_key;                // the EST's dropout stream
  uint64_t* dropout_counter = nullptr;  // advanced by every Dropout node, in node order
  // Null: the pass runs on the CPU, on the values' host vectors. Else a device
  // backend (OnDevice): every value's elements are in its memory and work is
  // queued on its Stream().
  KernelBackend* device = nullptr;
  // On a device, when set: the counter's value at the pass's start in device
  // memory, so a replayed pass's kernels draw each step's own numbers; a node
  // then passes its offset from dropout_counter_start.
  const uint64_t* dropout_counter_slot = nullptr;
  uint64_t dropout_counter_start = 0;
  DeviceWorkspace* workspace = nullptr;  // on a device: the program's transient scratch
  OpTimes* op_times = nullptr;           // when set, the program adds each op's time
  bool op_times_by_node = false;         // keyed "<node name> <direction>" instead
};

// A value's elements in ctx.device's memory (float or int64 by its dtype),
// allocated there on first use.
template <typename T = float>
T* DeviceData(RunContext& ctx, const Value& v) {
  return static_cast<T*>(ctx.device->Address(nullptr, v.bytes(), v.mirror));
}

// The most dimensions the device halves index (cuda_ops::BroadcastDims); an
// op with more runs on the CPU only.
inline constexpr size_t kMaxDeviceRank = 8;

#ifdef EASYSCALE_WITH_CUDA
// Hands the pass to the op's device half when a device runs it.
#define ES_RUN_ON_DEVICE(ctx, call) \
  if ((ctx).device != nullptr) return call
#else
#define ES_RUN_ON_DEVICE(ctx, call) static_cast<void>(ctx)
#endif

// What an op's factory sees of one input: its dtype and shape, and its
// elements when the loader knows them at load time (an initializer, a Constant
// node, a folded shape computation). Ops read `constant` only for inputs ONNX
// means as configuration (Reshape's shape, Slice's starts, Split's sizes,
// Clip's bounds, ...), never for parameters, whose values change in training.
struct OpInput {
  const ValueInfo* info = nullptr;           // null: an omitted optional input
  const ConstantTensor* constant = nullptr;  // null: known only at run time
};

class Op {
 public:
  virtual ~Op() = default;

  // The dtype and shape of each of the node's outputs, in order (an omitted
  // output's entry is whatever the op would produce), computed by the factory
  // from the inputs' infos and constants: this is the graph's shape inference.
  virtual std::vector<ValueInfo> OutputInfos() const = 0;

  // Forward: `in` has the node's inputs (null for an omitted optional input),
  // `out` its outputs already Reset to the dtypes and shapes the graph infers
  // (null for an omitted output). May keep what Backward needs.
  virtual void Forward(RunContext& ctx, const std::vector<const Value*>& in,
                       const std::vector<Value*>& out) = 0;

  // Whether input `i` has a gradient through this op (a float input the op
  // is differentiable in; shapes, indices and running statistics are not).
  virtual bool HasGradient(size_t i) const = 0;

  // Backward, after this op's Forward of the same pass: `dout[j]` is the
  // gradient of output j (null: nothing flows there, read it as zeros);
  // `din[i]` is non-null exactly where a gradient is wanted (HasGradient(i)
  // and the input leads to a parameter) and not handed on (GradientOfOutput
  // below); it is Reset to the input's shape and
  // the op sets it (the runtime sums gradients of values with several
  // consumers, in its own documented order).
  virtual void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                        const std::vector<const Value*>& out, const std::vector<const Value*>& dout,
                        const std::vector<Value*>& din) = 0;

  // The output whose gradient is input `i`'s, element for element in the same
  // order whatever the shapes (an Add's operand that is not broadcast, a
  // reshape's input): the runtime then hands that gradient on as input i's
  // and passes Backward a null din[i]. Only a zero's sign may differ from
  // what a rule summing from +0 gives, which no fixed-point sum sees.
  virtual std::optional<size_t> GradientOfOutput(size_t /*i*/) const { return std::nullopt; }

  // Whether Backward reads the elements of input `i` / output `j` (every op
  // may read shapes). The runtime reuses the memory of a value no backward
  // reads as soon as the forward pass is done with it, so an op that says
  // false must not touch those elements (on a device: not even ask DeviceData
  // for them). By default an op reads them all.
  virtual bool BackwardReadsInput(size_t /*i*/) const { return true; }
  virtual bool BackwardReadsOutput(size_t /*j*/) const { return true; }
  // Which inputs' gradients Backward will be asked for (din[i] non-null), as
  // the runtime knows before any pass: an op whose rules read some elements
  // only for some inputs' gradients may answer BackwardReads* for those
  // alone from then on (a value scaled by a constant need not be kept).
  virtual void SetWantedGradients(const std::vector<bool>& /*wanted*/) {}
  // Whether Forward is a cheap pure function of the inputs' elements (a
  // layout copy: no randomness, no state, one output): the runtime may let
  // such an output of values it keeps anyway (parameters, constants, inputs)
  // go after the forward pass and run Forward again before a backward that
  // reads it (a linear layer's transposed weight).
  virtual bool Recomputable() const { return false; }

  // Whether output `o` may be left out (ONNX marks it optional and the op
  // handles a null out[o]): the runtime leaves out such an output that no node
  // reads and the graph does not return (PyTorch's exported Dropout names its
  // mask, which nothing reads).
  virtual bool OutputOptional(size_t /*o*/) const { return false; }

  // Outputs that are the new value of a state input in training (BatchNormalization's
  // running mean and variance): pairs {output index, input index}. The runtime
  // writes them back into the EST's buffers after the pass.
  virtual std::vector<std::pair<size_t, size_t>> StateUpdates() const { return {}; }

  // Whether the op has a device half for its configuration (see the top).
  virtual bool RunsOnDevice() const { return false; }
};

// The op of `node` with its attributes and inputs validated; InvalidArgument
// naming the node and the attribute or input for a bad or unsupported value or
// shape, Unimplemented naming the node, the op and `opset` for an unknown op.
StatusOr<std::unique_ptr<Op>> MakeOp(const Node& node, int64_t opset,
                                     const std::vector<OpInput>& inputs);

}  // namespace easyscale::graph
