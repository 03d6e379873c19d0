// Squeeze: input's elements in the same order without the size-1 dimensions
// `axes` names (from the second input since opset 13, an attribute before;
// all size-1 dimensions when absent). Any dtype.
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeSqueeze(const Node& node, int64_t opset,
                                          const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, 0, "data"));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  ES_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                      IntsAttributeOrInput(node, opset, inputs, 1, "axes"));
  std::vector<bool> drop(rank, false);
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) drop[d] = x->shape[d] == 1;
  }
  for (int64_t a : axes) {
    ES_ASSIGN_OR_RETURN(const int64_t d, NormalizeAxis(node, "axes entry", a, rank));
    if (drop[d]) return NodeError(node, absl::StrCat("axes names dimension ", d, " twice"));
    if (x->shape[d] != 1) {
      return NodeError(node, absl::StrCat("axes names dimension ", d, " of size ", x->shape[d],
                                          ", not 1, of data ", ShapeString(x->shape)));
    }
    drop[d] = true;
  }
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!drop[d]) out.push_back(x->shape[d]);
  }
  return std::make_unique<SameOrderOp>(x->dtype, out);
}

}  // namespace easyscale::graph
