// The graph runtime behind the worker's Model interface.
#include "graph/graph_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/sha256.h"
#include "easyscale/worker/philox.h"
#include "graph/builtin_models.h"
#include "graph/program.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

// An ONNX file is at most this large (a model, not a data set).
constexpr size_t kMaxModelFileBytes = size_t{2} << 30;

std::vector<int> IntShape(const Shape& s) { return std::vector<int>(s.begin(), s.end()); }

class GraphModel : public Model {
 public:
  GraphModel(std::unique_ptr<Program> program, std::string source, std::string fingerprint,
             int batch, std::map<std::string, int> fan_in)
      : program_(std::move(program)),
        source_(std::move(source)),
        fingerprint_(std::move(fingerprint)),
        batch_(batch),
        fan_in_(std::move(fan_in)) {
    for (const std::string& name : program_->parameters()) {
      Param& p = owned_.emplace_back();
      p.name = name;
      p.value = Tensor(IntShape(program_->Initializer(name).shape));
      p.grad = Tensor(p.value.shape);
    }
    for (Param& p : owned_) params_.push_back(&p);
  }

  void InitParams(uint64_t seed) override {
    for (size_t i = 0; i < params_.size(); ++i) {
      Param& p = *params_[i];
      auto fan_in = fan_in_.find(p.name);
      if (fan_in == fan_in_.end()) {
        p.value.data = program_->graph().initializers.at(p.name).floats;
        continue;
      }
      // PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for biases,
      // Kaiming-uniform with a = sqrt(5) (the same bound) for weights.
      const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in->second));
      PhiloxStream rng(DeriveKey(seed, 0x1000 + i), 0);
      for (float& v : p.value.data) v = (2.0f * rng.NextUniform() - 1.0f) * bound;
    }
  }

  const Tensor& Forward(const Tensor& x, PassContext& ctx) override {
    RunContext rc = RunContextOf(ctx);
    Value& input = program_->Input(0);
    ES_CHECK(x.size() == input.size())
        << "batch of " << x.size() << " values, the graph takes " << input.size();
    if (rc.device != nullptr) {
      CopyInputOnDevice(rc, x, input);
    } else if (input.dtype == DType::kFloat32) {
      std::memcpy(input.floats.data(), x.ptr(), x.bytes());
    } else {  // token ids arrive as floats (exact below 2^24)
      for (size_t i = 0; i < x.size(); ++i) input.ints[i] = static_cast<int64_t>(x.data[i]);
    }
    // The parameters' and the EST's buffers' elements (and device mirrors)
    // move into the graph for the pass and back after it: no copies.
    SwapParameters();
    SwapState(ctx);
    program_->Forward(rc);
    SwapState(ctx);
    SwapParameters();
    const Value& out = program_->Output(0);
    logits_.Resize(IntShape(out.shape));
    if (rc.device != nullptr) {
      rc.device->Copy(out.bytes(), DeviceData(rc, out), rc.device->At(logits_));
    } else {
      logits_.data = out.floats;
    }
    return logits_;
  }

  void Backward(const Tensor& dlogits, PassContext& ctx) override {
    RunContext rc = RunContextOf(ctx);
    Value seed = program_->TakeGradient(rc, program_->Output(0).shape);
    if (rc.device != nullptr) {
      rc.device->Copy(dlogits.bytes(), rc.device->At(dlogits), DeviceData(rc, seed));
    } else {
      seed.floats = dlogits.data;
    }
    // The parameters' gradients are written into their grad tensors' memory.
    SwapParameters();
    SwapGradients();
    program_->Backward(rc, 0, std::move(seed));
    for (Param* p : params_) program_->Gradient(p->name);  // checks that each got one
    SwapGradients();
    SwapParameters();
  }

  // The batch into the graph's input on rc's device: token ids converted to
  // int64 there as the CPU converts them.
  static void CopyInputOnDevice(RunContext& rc, const Tensor& x, Value& input) {
    if (input.dtype == DType::kFloat32) {
      rc.device->Copy(x.bytes(), rc.device->At(x), DeviceData(rc, input));
      return;
    }
#ifdef EASYSCALE_WITH_CUDA
    CheckLaunch(cuda_ops::FloatsToInt64(x.size(), rc.device->At(x), DeviceData<int64_t>(rc, input),
                                        StreamOf(rc)),
                "token ids");
#endif
  }

  Status CheckRunsOnDevice() const override {
    Status s = program_->CheckRunsOnDevice();
    if (s.ok()) return s;
    return absl::FailedPreconditionError(absl::StrCat(source_, ": ", s.message()));
  }

  std::vector<Tensor> InitialBuffers() const override {
    std::vector<Tensor> buffers;
    for (const std::string& name : program_->state()) {
      const ConstantTensor& c = program_->graph().initializers.at(name);
      Tensor t(IntShape(c.shape));
      t.data = c.floats;
      buffers.push_back(std::move(t));
    }
    return buffers;
  }

  std::vector<std::string> BufferNames() const override { return program_->state(); }

  Status AcceptsData(const Dataset& data) const override {
    const Graph& g = program_->graph();
    const std::string& input = g.inputs.at(0);
    if (g.values.at(input).dtype == DType::kFloat32) return absl::OkStatus();
    if (data.type != SampleType::kTokenIds) {
      return absl::InvalidArgumentError(source_ + ": input " + input +
                                        " takes int64 ids: the data set has images or float "
                                        "values (--dataset tokens, or int64 inputs in --data, "
                                        "give ids)");
    }
    if (data.token_ids.empty()) return absl::OkStatus();
    const int64_t largest = *std::max_element(data.token_ids.begin(), data.token_ids.end());
    // Ids index the tables of the Gathers that read the input directly.
    for (const Node& n : g.nodes) {
      if (n.op != "Gather" || n.inputs.size() < 2 || n.inputs[1] != input) continue;
      const Shape& table = g.values.at(n.inputs[0]).shape;
      ES_ASSIGN_OR_RETURN(int64_t axis, n.Get<int64_t>("axis", 0));
      if (axis < 0) axis += static_cast<int64_t>(table.size());
      const int64_t rows = table.at(static_cast<size_t>(axis));
      if (largest >= rows) {
        return absl::InvalidArgumentError(absl::StrCat(
            source_, ": input ", input, ": the data has token id ", largest, ", node ", n.name,
            " has ", rows, " rows (the model's vocabulary is smaller than the data's)"));
      }
    }
    return absl::OkStatus();
  }

  int FixedBatch() const override { return batch_; }
  size_t PeakBytesInUse() const override { return program_->PeakBytesInUse(); }
  std::span<std::byte> DeviceMemoryIdleBetweenPasses() const override {
    return program_->ArenaBetweenPasses();
  }
  std::string Fingerprint() const override { return fingerprint_; }

 private:
  // Exchanges the parameters' elements with the graph's initializers (twice: back).
  void SwapParameters() {
    for (Param* p : params_) Swap(p->value, program_->Initializer(p->name));
  }
  void SwapGradients() {
    for (Param* p : params_) Swap(p->grad, program_->GradientBuffer(p->name));
  }
  void SwapState(PassContext& ctx) {
    const std::vector<std::string>& state = program_->state();
    for (size_t k = 0; k < state.size(); ++k) {
      Swap((*ctx.buffers)[k], program_->Initializer(state[k]));
    }
  }
  static void Swap(Tensor& t, Value& v) {
    std::swap(t.data, v.floats);
    std::swap(t.mirror, v.mirror);
  }
  // The pass on ctx's backend: the CPU's kernels unless it is a device.
  static RunContext RunContextOf(const PassContext& ctx) {
    KernelBackend* device =
        ctx.kernels != nullptr && ctx.kernels->OnDevice() ? ctx.kernels : nullptr;
    RunContext rc{ctx.training, ctx.dropout_key, ctx.dropout_counter, device};
    rc.op_times = ctx.op_times;
    rc.op_times_by_node = ctx.op_times_by_node;
    if (device != nullptr && ctx.dropout_counter_slot != nullptr) {
      rc.dropout_counter_slot = ctx.dropout_counter_slot;
      rc.dropout_counter_start = *ctx.dropout_counter;  // called as the pass starts
    }
    return rc;
  }

  std::unique_ptr<Program> program_;
  std::string source_;  // the file, or the built-in model: for errors
  std::string fingerprint_;
  int batch_;
  std::map<std::string, int> fan_in_;  // parameters drawn from the seed (a built-in model's)
  std::vector<Param> owned_;           // never resized after the constructor: params_ points in
  Tensor logits_;
};

// A graph from a file or built in C++ (`source` names it in errors) as the
// model: its logits checked, its parameters found.
StatusOr<std::unique_ptr<Model>> MakeGraphModel(Graph g, const std::string& source,
                                                const std::string& fingerprint, int classes,
                                                int batch, std::map<std::string, int> fan_in) {
  const ValueInfo& out = g.values.at(g.outputs.at(0));
  // Outputs beyond the data's classes are allowed (labels 0..k-1 of a k+ way model).
  if (out.dtype != DType::kFloat32 || out.shape.size() != 2 || out.shape[0] != batch ||
      out.shape[1] < classes) {
    std::string shape;
    for (int64_t d : out.shape) absl::StrAppend(&shape, shape.empty() ? "" : "x", d);
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": output ", g.outputs[0], " is ", ToString(out.dtype), " ", shape,
        ", want float32 ", batch, "xK logits with K >= the data's ", classes, " classes"));
  }
  ES_ASSIGN_OR_RETURN(std::unique_ptr<Program> program, Program::Create(std::move(g)));
  if (program->parameters().empty()) {
    // Say which weights were there but not float32: the usual cause.
    std::string integers;
    for (const auto& [name, c] : program->graph().initializers) {
      if (c.dtype != DType::kFloat32 && program->graph().constants.count(name) == 0) {
        absl::StrAppend(&integers, integers.empty() ? "" : ", ", name);
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no float initializer the logits depend on: nothing to train",
                     integers.empty() ? ""
                                      : " (integer initializers " + integers +
                                            " are never trained: export parameters as float32)"));
  }
  return std::unique_ptr<Model>(std::make_unique<GraphModel>(
      std::move(program), source, fingerprint, batch, std::move(fan_in)));
}

}  // namespace

StatusOr<std::vector<int>> ImageInputShape(const std::string& path) {
  ES_ASSIGN_OR_RETURN(const std::vector<DataInput> inputs, OnnxDataInputs(path));
  const auto fixed = [](int64_t d) { return d > 0 && d <= (1 << 16); };
  if (inputs.size() != 1 || inputs[0].dims.size() != 4 ||
      !std::all_of(inputs[0].dims.begin() + 1, inputs[0].dims.end(), fixed)) {
    return absl::InvalidArgumentError(
        path +
        ": an image folder needs a model whose one input is [N, C, H, W] with C, H and W "
        "fixed (the size images are resized to)");
  }
  return std::vector<int>(inputs[0].dims.begin() + 1, inputs[0].dims.end());
}

StatusOr<std::unique_ptr<Model>> LoadGraphModel(const std::string& path, std::vector<int> input_chw,
                                                int classes, int batch) {
  if (path.empty()) return absl::InvalidArgumentError("--model-file: no file given");
  ES_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, kMaxModelFileBytes));
  const std::string fingerprint = Sha256Hex(bytes.data(), bytes.size());
  ES_ASSIGN_OR_RETURN(const std::vector<DataInput> inputs, OnnxDataInputs(path));
  if (inputs.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the model takes ", inputs.size(),
                                                   " data inputs; the worker feeds exactly one"));
  }
  // The graph's one data input takes the micro-batch: [B, C, H, W] images, or
  // [B, C*H*W] for a rank-2 input (token sequences, tabular rows).
  Shape input = {batch};
  if (inputs[0].rank == 2) {
    int64_t features = 1;
    for (int d : input_chw) features *= d;
    input.push_back(features);
  } else {
    for (int d : input_chw) input.push_back(d);
  }
  ES_ASSIGN_OR_RETURN(Graph g, LoadOnnxModel(path, {{inputs[0].name, input}}));
  return MakeGraphModel(std::move(g), path, fingerprint, classes, batch, {});
}

StatusOr<std::unique_ptr<Model>> BuiltinGraphModel(const std::string& name,
                                                   const std::vector<int>& input_chw, int classes,
                                                   int batch) {
  ES_ASSIGN_OR_RETURN(BuiltinGraph b, MakeBuiltinGraph(name, input_chw, classes, batch));
  return MakeGraphModel(std::move(b.graph), "--model " + name, "", classes, batch,
                        std::move(b.fan_in));
}

}  // namespace easyscale::graph
