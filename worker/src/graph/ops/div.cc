// Div (ONNX): Y = A / B with numpy broadcasting; float32 (IEEE division), and
// int64 forward truncating toward zero (as C++ and onnxruntime; a zero
// divisor gives 0 where ONNX leaves it undefined).
//
// Order: Y one division per element. dA: dY / B, dB: -dY * (Y / B), as
// PyTorch's -dY * ((A / B) / B), each summed to the operand's shape in
// broadcast.h's order (ascending output index, from +0).
#include "graph/ops/binary_elementwise.h"
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeDiv(const Node& node, int64_t,
                                      const std::vector<OpInput>& inputs) {
  return MakeBinaryElementwise<DivFormula>(node, inputs);
}

}  // namespace easyscale::graph
