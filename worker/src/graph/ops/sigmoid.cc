// Sigmoid (ONNX): Y = detmath::Sigmoid(X) = 1 / (1 + exp(-X)), float32.
//
// No reductions. dX = dY * ((1 - Y) * Y).
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/ops.h"
#include "graph/ops/unary_elementwise.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeSigmoid(const Node& node, int64_t,
                                          const std::vector<OpInput>& inputs) {
  return MakeUnaryElementwise<SigmoidFormula>(node, inputs);
}

}  // namespace easyscale::graph
