// Flatten: input of shape [d0, ..., dn-1] as [d0 * ... * d(axis-1),
// d(axis) * ... * dn-1], elements in the same order (any dtype).
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeFlatten(const Node& node, int64_t,
                                          const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, 0, "input"));
  ES_ASSIGN_OR_RETURN(int64_t axis, node.Get<int64_t>("axis", 1));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  // axis is in [-rank, rank]: rank itself puts everything in the outer dimension.
  if (axis < -rank || axis > rank) {
    return NodeError(node,
                     absl::StrCat("attribute axis ", axis, " is out of range for rank ", rank));
  }
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x->shape[d];
  return std::make_unique<SameOrderOp>(x->dtype, Shape{outer, inner});
}

}  // namespace easyscale::graph
