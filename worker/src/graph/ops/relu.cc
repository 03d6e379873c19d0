// Relu (ONNX): Y = max(X, 0), float32; NaN stays NaN, as PyTorch's.
//
// No reductions. dX = dY where X > 0, else 0.
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/ops.h"
#include "graph/ops/unary_elementwise.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeRelu(const Node& node, int64_t,
                                       const std::vector<OpInput>& inputs) {
  return MakeUnaryElementwise<ReluFormula>(node, inputs);
}

}  // namespace easyscale::graph
