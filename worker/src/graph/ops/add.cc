// Add (ONNX): Y = A + B with numpy broadcasting; float32, and int64 forward.
//
// Order: Y one addition per element. dA and dB: dY summed to each operand's
// shape in broadcast.h's order (ascending output index, from +0).
#include "graph/ops/binary_elementwise.h"
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeAdd(const Node& node, int64_t,
                                      const std::vector<OpInput>& inputs) {
  return MakeBinaryElementwise<AddFormula>(node, inputs);
}

}  // namespace easyscale::graph
