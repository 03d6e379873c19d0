// The ONNX operators the graph runtime runs, and their factories.
#include <algorithm>
#include <utility>

#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

struct Entry {
  const char* op;
  OpFactory make;
};

// One line per op, kept sorted by name.
const std::vector<Entry>& Registry() {
  // clang-format off
  static const std::vector<Entry> kOps = {
      {"Add", MakeAdd},
      {"Clip", MakeClip},
      {"Div", MakeDiv},
      {"Erf", MakeErf},
      {"LayerNormalization", MakeLayerNormalization},
      {"LogSoftmax", MakeLogSoftmax},
      {"Mul", MakeMul},
      {"Pow", MakePow},
      {"ReduceMean", MakeReduceMean},
      {"Relu", MakeRelu},
      {"Sigmoid", MakeSigmoid},
      {"Softmax", MakeSoftmax},
      {"Sqrt", MakeSqrt},
      {"Sub", MakeSub},
      {"Tanh", MakeTanh},
  };
  // clang-format on
  return kOps;
}

}  // namespace

const std::vector<std::string>& SupportedOps() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const Entry& e : Registry()) names.push_back(e.op);
    return names;
  }();
  return kNames;
}

StatusOr<std::unique_ptr<Op>> MakeOp(const Node& node, int64_t opset,
                                     const std::vector<OpInput>& inputs) {
  for (const Entry& e : Registry()) {
    if (node.op == e.op) return e.make(node, opset, inputs);
  }
  return absl::UnimplementedError(absl::StrCat("node ", node.name, ": operator ", node.op,
                                               " (opset ", opset, ") is not supported"));
}

}  // namespace easyscale::graph
