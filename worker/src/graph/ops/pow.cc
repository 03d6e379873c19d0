// Pow (ONNX): Y = A ^ B with numpy broadcasting; A float32, B float32 or
// int64 (converted to float). Y = detmath::Pow(A, B): exp(B * log|A|) with
// IEEE pow's special cases, exact for B == 1 and B == 2 (detmath.h).
//
// Gradient for the base only: dA = dY * (B * Pow(A, B - 1)), summed to A's
// shape in broadcast.h's order (ascending output index, from +0). The
// exponent has none (HasGradient false): exported models raise to constant
// powers (x^2 in variances, x^3 in GELU's tanh form), and Y * log A is
// undefined for the negative bases those powers see.
#include "easyscale/worker/detmath.h"
#include "graph/ops/binary_elementwise.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

struct PowFormula {
  static constexpr bool kInt64 = false;
  static constexpr bool kInt64Exponent = true;
  static constexpr bool kGradB = false;
  static float Apply(float a, float b) { return detmath::Pow(a, b); }
  static float GradA(float a, float b, float, float dy) {
    return dy * (b * detmath::Pow(a, b - 1.0f));
  }
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakePow(const Node& node, int64_t,
                                      const std::vector<OpInput>& inputs) {
  return MakeBinaryElementwise<PowFormula>(node, inputs);
}

}  // namespace easyscale::graph
