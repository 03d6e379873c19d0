// Tanh (ONNX): Y = detmath::Tanh(X), float32.
//
// No reductions. dX = dY * (1 - Y * Y), as PyTorch's.
#include "easyscale/worker/detmath.h"
#include "graph/ops/ops.h"
#include "graph/ops/unary_elementwise.h"

namespace easyscale::graph {
namespace {

struct TanhFormula {
  static float Apply(float x) { return detmath::Tanh(x); }
  static float Grad(float, float y, float dy) { return dy * (1.0f - y * y); }
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeTanh(const Node& node, int64_t,
                                       const std::vector<OpInput>& inputs) {
  return MakeUnaryElementwise<TanhFormula>(node, inputs);
}

}  // namespace easyscale::graph
