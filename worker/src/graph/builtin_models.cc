// The built-in models as graphs, layer by layer as torch.nn.Sequential
// indexes them.
#include "graph/builtin_models.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"
#include "graph/op.h"

namespace easyscale::graph {
namespace {

// Appends layers to a graph, each reading the previous one's output; the
// first error (a bug: the sizes were checked before) is kept for Finish.
class SequentialBuilder {
 public:
  explicit SequentialBuilder(Shape input) {
    b_.graph.opset = 15;  // BatchNormalization's training_mode attribute, Dropout's inputs
    b_.graph.inputs = {last_};
    b_.graph.values[last_] = {DType::kFloat32, std::move(input)};
  }

  void Conv(int index, int in, int out, int kernel) {
    const int fan_in = in * kernel * kernel;
    Add(index, "Conv",
        {last_, Parameter(index, "weight", {out, in, kernel, kernel}, fan_in),
         Parameter(index, "bias", {out}, fan_in)},
        {{"kernel_shape", std::vector<int64_t>{kernel, kernel}}});
  }
  // PyTorch's Linear: y = x W^T + b with W [out, in].
  void Linear(int index, int in, int out) {
    Add(index, "Gemm",
        {last_, Parameter(index, "weight", {out, in}, in), Parameter(index, "bias", {out}, in)},
        {{"transB", int64_t{1}}});
  }
  // Momentum 0.9 is ONNX's form of PyTorch's 0.1.
  void BatchNorm(int index, int channels) {
    const Shape c = {channels};
    Add(index, "BatchNormalization",
        {last_, Initializer(Key(index, "weight"), c, 1.0f),
         Initializer(Key(index, "bias"), c, 0.0f), Initializer(Key(index, "running_mean"), c, 0.0f),
         Initializer(Key(index, "running_var"), c, 1.0f)},
        {{"epsilon", 1e-5f}, {"momentum", 0.9f}, {"training_mode", int64_t{1}}}, 3);
  }
  void Dropout(int index, float ratio) {
    Add(index, "Dropout",
        {last_, Constant(Key(index, "ratio"), {DType::kFloat32, {}, {ratio}, {}}),
         Constant(Key(index, "training_mode"), {DType::kBool, {}, {}, {1}})},
        {});
  }
  void Pool2(int index, const std::string& op) {
    Add(index, op, {last_},
        {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  }
  void Unary(int index, const std::string& op) { Add(index, op, {last_}, {}); }

  StatusOr<BuiltinGraph> Finish() && {
    ES_RETURN_IF_ERROR(status_);
    b_.graph.outputs = {last_};
    return std::move(b_);
  }

 private:
  static std::string Key(int index, const std::string& name) {
    return absl::StrCat(index, ".", name);
  }

  std::string Initializer(std::string name, Shape shape, float value) {
    ConstantTensor t{DType::kFloat32, shape, std::vector<float>(NumElements(shape), value), {}};
    b_.graph.values[name] = {t.dtype, std::move(shape)};
    b_.graph.initializers[name] = std::move(t);
    return name;
  }
  std::string Parameter(int index, const std::string& name, Shape shape, int fan_in) {
    const std::string key = Key(index, name);
    b_.fan_in[key] = fan_in;
    return Initializer(key, std::move(shape), 0.0f);
  }
  // A configuration input: never a parameter, whatever reads it.
  std::string Constant(std::string name, ConstantTensor t) {
    b_.graph.values[name] = {t.dtype, t.shape};
    b_.graph.initializers[name] = std::move(t);
    b_.graph.constants.insert(name);
    return name;
  }

  // The node's outputs are named "<index>.out<o>"; its op infers their shapes.
  void Add(int index, const std::string& op, std::vector<std::string> inputs,
           std::map<std::string, Attribute> attributes, int outputs = 1) {
    if (!status_.ok()) return;
    Node node{absl::StrCat("/", index, "/", op), op, std::move(inputs), {}, std::move(attributes)};
    for (int o = 0; o < outputs; ++o) node.outputs.push_back(absl::StrCat(index, ".out", o));
    std::vector<OpInput> in;
    for (const std::string& name : node.inputs) {
      auto c = b_.graph.initializers.find(name);
      in.push_back(
          {&b_.graph.values.at(name), c == b_.graph.initializers.end() ? nullptr : &c->second});
    }
    StatusOr<std::unique_ptr<Op>> made = MakeOp(node, b_.graph.opset, in);
    if (!made.ok()) {
      status_ = made.status();
      return;
    }
    const std::vector<ValueInfo> infos = (*made)->OutputInfos();
    for (size_t o = 0; o < node.outputs.size(); ++o) b_.graph.values[node.outputs[o]] = infos[o];
    last_ = node.outputs[0];
    b_.graph.nodes.push_back(std::move(node));
  }

  BuiltinGraph b_;
  std::string last_ = "input";
  Status status_;
};

}  // namespace

StatusOr<BuiltinGraph> MakeBuiltinGraph(const std::string& name, const std::vector<int>& input_chw,
                                        int classes, int batch) {
  if (input_chw.size() != 3) {
    return absl::InvalidArgumentError("--model " + name +
                                      ": takes [C, H, W] images, the data's samples are not "
                                      "images (train them with --model-file)");
  }
  const int C = input_chw[0], H = input_chw[1], W = input_chw[2];
  SequentialBuilder s({batch, C, H, W});
  if (name == "mlp") {
    if (H % 2 || W % 2) return absl::InvalidArgumentError("mlp: input H and W must be even");
    s.Pool2(0, "AveragePool");
    s.Unary(1, "Flatten");
    s.Linear(2, C * (H / 2) * (W / 2), 128);
    s.Unary(3, "Relu");
    s.Dropout(4, 0.1f);
    s.Linear(5, 128, classes);
  } else if (name == "cnn") {
    const int h1 = H - 4, w1 = W - 4;
    if (h1 < 2 || h1 % 2 || w1 % 2 || (h1 / 2 - 4) < 2 || (h1 / 2 - 4) % 2 || (w1 / 2 - 4) % 2) {
      return absl::InvalidArgumentError(
          "cnn: input must be at least 20x20 with H-4, W-4 divisible by 4");
    }
    const int h2 = (h1 / 2 - 4) / 2, w2 = (w1 / 2 - 4) / 2;
    s.Conv(0, C, 8, 5);
    s.BatchNorm(1, 8);
    s.Unary(2, "Relu");
    s.Pool2(3, "MaxPool");
    s.Conv(4, 8, 16, 5);
    s.BatchNorm(5, 16);
    s.Unary(6, "Relu");
    s.Pool2(7, "MaxPool");
    s.Unary(8, "Flatten");
    s.Dropout(9, 0.25f);
    s.Linear(10, 16 * h2 * w2, 64);
    s.Unary(11, "Relu");
    s.Linear(12, 64, classes);
  } else {
    return absl::InvalidArgumentError("unknown model \"" + name + "\" (want mlp or cnn)");
  }
  return std::move(s).Finish();
}

}  // namespace easyscale::graph
