// Unsqueeze: input's elements in the same order with size-1 dimensions
// inserted at `axes` (indices into the output's dimensions; from the second
// input since opset 13, an attribute before). Any dtype.
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeUnsqueeze(const Node& node, int64_t opset,
                                            const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, 0, "data"));
  std::vector<int64_t> axes;
  if (opset >= 13) {
    ES_ASSIGN_OR_RETURN(axes, ConstantInts(node, inputs, 1, "axes"));
  } else {
    ES_ASSIGN_OR_RETURN(axes, node.Get<std::vector<int64_t>>("axes", {}));
  }
  if (axes.empty()) return NodeError(node, "axes is empty");
  const int64_t rank = static_cast<int64_t>(x->shape.size() + axes.size());
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    ES_ASSIGN_OR_RETURN(const int64_t d, NormalizeAxis(node, "axes entry", a, rank));
    if (inserted[d]) return NodeError(node, absl::StrCat("axes names dimension ", d, " twice"));
    inserted[d] = true;
  }
  Shape out;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) out.push_back(inserted[d] ? 1 : x->shape[next++]);
  return std::make_unique<SameOrderOp>(x->dtype, out);
}

}  // namespace easyscale::graph
