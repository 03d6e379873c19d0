// Sub (ONNX): Y = A - B with numpy broadcasting; float32, and int64 forward.
//
// Order: Y one subtraction per element. dA: dY, dB: -dY, each summed to the
// operand's shape in broadcast.h's order (ascending output index, from +0).
#include "graph/ops/binary_elementwise.h"
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeSub(const Node& node, int64_t,
                                      const std::vector<OpInput>& inputs) {
  return MakeBinaryElementwise<SubFormula>(node, inputs);
}

}  // namespace easyscale::graph
