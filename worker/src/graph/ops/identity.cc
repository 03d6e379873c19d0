// Identity: the output is the input (any dtype); the gradient passes through.
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeIdentity(const Node& node, int64_t,
                                           const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, 0, "input"));
  return std::make_unique<SameOrderOp>(x->dtype, x->shape);
}

}  // namespace easyscale::graph
