// Relu (ONNX): Y = max(X, 0), float32; NaN stays NaN, as PyTorch's.
//
// No reductions. dX = dY where X > 0, else 0.
#include "graph/ops/ops.h"
#include "graph/ops/unary_elementwise.h"

namespace easyscale::graph {
namespace {

struct ReluFormula {
  static float Apply(float x) { return x < 0.0f ? 0.0f : x; }
  static float Grad(float x, float, float dy) { return x > 0.0f ? dy : 0.0f; }
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeRelu(const Node& node, int64_t,
                                       const std::vector<OpInput>& inputs) {
  return MakeUnaryElementwise<ReluFormula>(node, inputs);
}

}  // namespace easyscale::graph
