// Erf (ONNX): Y = detmath::Erf(X), float32 (GELU as PyTorch exports it is
// 0.5 * X * (1 + Erf(X / sqrt 2))).
//
// No reductions. dX = dY * (2/sqrt(pi) * detmath::Exp(-(X * X))).
#include "easyscale/worker/detmath.h"
#include "graph/ops/ops.h"
#include "graph/ops/unary_elementwise.h"

namespace easyscale::graph {
namespace {

struct ErfFormula {
  static float Apply(float x) { return detmath::Erf(x); }
  static float Grad(float x, float, float dy) {
    const float kTwoOverSqrtPi = 1.12837916709551257f;
    return dy * (kTwoOverSqrtPi * detmath::Exp(-(x * x)));
  }
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeErf(const Node& node, int64_t,
                                      const std::vector<OpInput>& inputs) {
  return MakeUnaryElementwise<ErfFormula>(node, inputs);
}

}  // namespace easyscale::graph
