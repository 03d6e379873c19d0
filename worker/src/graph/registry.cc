// The ONNX operators the graph runtime runs, and their factories.
#include <algorithm>
#include <utility>

#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

struct Entry {
  const char* op;
  OpFactory make;
  bool fused = false;  // a node only graph/fusion.h makes, not an ONNX operator
};

// One line per op, kept sorted by name.
const std::vector<Entry>& Registry() {
  // clang-format off
  static const std::vector<Entry> kOps = {
      {"Add", MakeAdd},
      {"AveragePool", MakeAveragePool},
      {"BatchNormalization", MakeBatchNormalization},
      {"BatchNormalization+Clip", MakeBatchNormalizationClip, true},
      {"BatchNormalization+Relu", MakeBatchNormalizationRelu, true},
      {"Cast", MakeCast},
      {"Clip", MakeClip},
      {"Concat", MakeConcat},
      {"ConstantOfShape", MakeConstantOfShape},
      {"Conv", MakeConv},
      {"Div", MakeDiv},
      {"Dropout", MakeDropout},
      {"Dropout+Add", MakeDropoutAdd, true},
      {"Erf", MakeErf},
      {"Flatten", MakeFlatten},
      {"Gather", MakeGather},
      {"Gelu", MakeGelu},
      {"Gemm", MakeGemm},
      {"GlobalAveragePool", MakeGlobalAveragePool},
      {"Identity", MakeIdentity},
      {"LayerNormalization", MakeLayerNormalization},
      {"LogSoftmax", MakeLogSoftmax},
      {"MatMul", MakeMatMul},
      {"MatMul+Add", MakeMatMulAdd, true},
      {"MaxPool", MakeMaxPool},
      {"Mul", MakeMul},
      {"Mul+Softmax", MakeScaledSoftmax, true},
      {"Pow", MakePow},
      {"Range", MakeRange},
      {"ReduceMean", MakeReduceMean},
      {"Relu", MakeRelu},
      {"Reshape", MakeReshape},
      {"Shape", MakeShape},
      {"Sigmoid", MakeSigmoid},
      {"Slice", MakeSlice},
      {"Softmax", MakeSoftmax},
      {"Softmax+Dropout", MakeSoftmaxDropout, true},
      {"SoftmaxCrossEntropyLoss", MakeSoftmaxCrossEntropyLoss},
      {"Split", MakeSplit},
      {"Sqrt", MakeSqrt},
      {"Squeeze", MakeSqueeze},
      {"StridedMatMul", MakeStridedMatMul, true},
      {"Sub", MakeSub},
      {"Tanh", MakeTanh},
      {"Transpose", MakeTranspose},
      {"Transpose+MatMul", MakeTransposeMatMul, true},
      {"Transpose+MatMul+Add", MakeTransposeMatMulAdd, true},
      {"Unsqueeze", MakeUnsqueeze},
  };
  // clang-format on
  return kOps;
}

}  // namespace

const std::vector<std::string>& SupportedOps() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const Entry& e : Registry()) {
      if (!e.fused) names.push_back(e.op);
    }
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
