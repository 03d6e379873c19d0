// Pow (ONNX): Y = A ^ B with numpy broadcasting, Y of A's dtype. A float32:
// B float32 or int64 (converted to float), Y = detmath::Pow(A, B):
// exp(B * log|A|) with IEEE pow's special cases, exact for B == 1 and B == 2
// (detmath.h). A int64 (forward only): an integer-valued B gives the exact
// power by repeated squaring (wrapping around on overflow; a negative B
// truncates 1 / A^|B| toward zero), another float B the truncated float
// power (0 where that is NaN or beyond int64).
//
// Gradient for the base only: dA = dY * (B * Pow(A, B - 1)), summed to A's
// shape in broadcast.h's order (ascending output index, from +0). The
// exponent has none (HasGradient false): exported models raise to constant
// powers (x^2 in variances, x^3 in GELU's tanh form), and Y * log A is
// undefined for the negative bases those powers see.
#include "graph/ops/binary_elementwise.h"
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakePow(const Node& node, int64_t,
                                      const std::vector<OpInput>& inputs) {
  return MakeBinaryElementwise<PowFormula>(node, inputs);
}

}  // namespace easyscale::graph
