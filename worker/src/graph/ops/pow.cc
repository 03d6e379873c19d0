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
#include "easyscale/worker/detmath.h"
#include "graph/ops/binary_elementwise.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

struct PowFormula {
  static constexpr bool kInt64 = true;
  static constexpr bool kMixed = true;
  static constexpr bool kGradB = false;
  static float Apply(float a, float b) { return detmath::Pow(a, b); }
  static int64_t ApplyInt(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 != 0 ? -1 : 1) : 0;
    uint64_t result = 1, base = static_cast<uint64_t>(a);
    for (uint64_t e = static_cast<uint64_t>(b); e != 0; e >>= 1) {
      if (e & 1) result *= base;
      base *= base;
    }
    return static_cast<int64_t>(result);
  }
  static int64_t ApplyIntFloat(int64_t a, float b) {
    const float kLimit = 9.2e18f;  // below 2^63
    if (b > -kLimit && b < kLimit && b == static_cast<float>(static_cast<int64_t>(b))) {
      return ApplyInt(a, static_cast<int64_t>(b));
    }
    const float p = detmath::Pow(static_cast<float>(a), b);
    return p > -kLimit && p < kLimit ? static_cast<int64_t>(p) : 0;
  }
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
