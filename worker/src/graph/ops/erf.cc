// Erf (ONNX): Y = detmath::Erf(X), float32 (GELU as PyTorch exports it is
// 0.5 * X * (1 + Erf(X / sqrt 2))).
//
// No reductions. dX = dY * (2/sqrt(pi) * detmath::Exp(-(X * X))).
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/ops.h"
#include "graph/ops/unary_elementwise.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeErf(const Node& node, int64_t,
                                      const std::vector<OpInput>& inputs) {
  return MakeUnaryElementwise<ErfFormula>(node, inputs);
}

}  // namespace easyscale::graph
