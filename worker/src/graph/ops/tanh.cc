// Tanh (ONNX): Y = detmath::Tanh(X), float32.
//
// No reductions. dX = dY * (1 - Y * Y), as PyTorch's.
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/ops.h"
#include "graph/ops/unary_elementwise.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeTanh(const Node& node, int64_t,
                                       const std::vector<OpInput>& inputs) {
  return MakeUnaryElementwise<TanhFormula>(node, inputs);
}

}  // namespace easyscale::graph
