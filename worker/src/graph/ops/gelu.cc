// Gelu (ONNX, opset 20): Y = (X * (Erf(X / float(sqrt 2)) + 1)) * 0.5,
// float32, approximate "none" (the default; "tanh" is refused). The loader
// reads opsets up to 17, so today a Gelu node is the fusion of PyTorch's
// exported chain (fusion.h), whose operations and order it keeps.
//
// No reductions. dX: GeluFormula's steps (elementwise_formulas.h), the
// chain's rules in order, from X alone.
#include "absl/strings/str_cat.h"
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/ops.h"
#include "graph/ops/unary_elementwise.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeGelu(const Node& node, int64_t,
                                       const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const std::string approximate, node.Get<std::string>("approximate", "none"));
  if (approximate != "none") {
    return NodeError(node, absl::StrCat("attribute approximate is \"", approximate,
                                        "\": only \"none\" (the erf form) is supported"));
  }
  return MakeUnaryElementwise<GeluFormula>(node, inputs);
}

}  // namespace easyscale::graph
