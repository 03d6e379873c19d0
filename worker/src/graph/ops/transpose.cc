// Transpose: output dimension d is input dimension perm[d] (default: the
// dimensions reversed). Any dtype.
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeTranspose(const Node& node, int64_t,
                                            const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, 0, "data"));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  std::vector<int64_t> reversed;
  for (int64_t d = rank; d-- > 0;) reversed.push_back(d);
  ES_ASSIGN_OR_RETURN(std::vector<int64_t> perm, node.Get<std::vector<int64_t>>("perm", reversed));
  if (static_cast<int64_t>(perm.size()) != rank) {
    return NodeError(
        node, absl::StrCat("attribute perm has ", perm.size(), " entries for data of rank ", rank));
  }
  std::vector<bool> seen(rank, false);
  const std::vector<int64_t> in_strides = Strides(x->shape);
  Shape out;
  std::vector<int64_t> strides;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) {
      return NodeError(node, absl::StrCat("attribute perm is not a permutation of 0..", rank - 1));
    }
    seen[p] = true;
    out.push_back(x->shape[p]);
    strides.push_back(in_strides[p]);
  }
  return std::make_unique<StridedViewOp>(x->dtype, out, 0, strides);
}

}  // namespace easyscale::graph
