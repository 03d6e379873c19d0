// Mul (ONNX): Y = A * B with numpy broadcasting; float32, and int64 forward.
//
// Order: Y one product per element. dA: dY * B, dB: dY * A (one product per
// output element), each summed to the operand's shape in broadcast.h's
// order (ascending output index, from +0).
#include "graph/ops/binary_elementwise.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

struct MulFormula {
  static constexpr bool kInt64 = true;
  static constexpr bool kMixed = false;
  static constexpr bool kGradB = true;
  static float Apply(float a, float b) { return a * b; }
  // Two's complement wrap-around rather than undefined overflow.
  static int64_t ApplyInt(int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  }
  static float GradA(float, float b, float, float dy) { return dy * b; }
  static float GradB(float a, float, float, float dy) { return dy * a; }
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeMul(const Node& node, int64_t,
                                      const std::vector<OpInput>& inputs) {
  return MakeBinaryElementwise<MulFormula>(node, inputs);
}

}  // namespace easyscale::graph
