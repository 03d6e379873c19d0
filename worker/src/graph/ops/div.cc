// Div (ONNX): Y = A / B with numpy broadcasting; float32 (IEEE division), and
// int64 forward truncating toward zero (as C++ and onnxruntime; a zero
// divisor gives 0 where ONNX leaves it undefined).
//
// Order: Y one division per element. dA: dY / B, dB: -dY * (Y / B), as
// PyTorch's -dY * ((A / B) / B), each summed to the operand's shape in
// broadcast.h's order (ascending output index, from +0).
#include "graph/ops/binary_elementwise.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

struct DivFormula {
  static constexpr bool kInt64 = true;
  static constexpr bool kMixed = false;
  static constexpr bool kGradB = true;
  static float Apply(float a, float b) { return a / b; }
  static int64_t ApplyInt(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));  // no INT64_MIN trap
    return a / b;
  }
  static float GradA(float, float b, float, float dy) { return dy / b; }
  static float GradB(float, float b, float y, float dy) { return -dy * (y / b); }
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeDiv(const Node& node, int64_t,
                                      const std::vector<OpInput>& inputs) {
  return MakeBinaryElementwise<DivFormula>(node, inputs);
}

}  // namespace easyscale::graph
