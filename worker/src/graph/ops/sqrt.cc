// Sqrt (ONNX): Y = sqrt(X), float32, IEEE square root (correctly rounded on
// every device).
//
// No reductions. dX = dY / (2 * Y), as PyTorch's.
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/ops.h"
#include "graph/ops/unary_elementwise.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeSqrt(const Node& node, int64_t,
                                       const std::vector<OpInput>& inputs) {
  return MakeUnaryElementwise<SqrtFormula>(node, inputs);
}

}  // namespace easyscale::graph
