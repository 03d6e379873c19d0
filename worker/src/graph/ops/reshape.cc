// Reshape: input's elements in the same order under the shape its second input
// gives, known at load time: 0 copies the input's dimension at that index
// (unless allowzero=1, where 0 is an empty dimension) and one -1 takes what
// the element count leaves. Any dtype.
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeReshape(const Node& node, int64_t,
                                          const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, 0, "data"));
  ES_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ConstantInts(node, inputs, 1, "shape"));
  ES_ASSIGN_OR_RETURN(const int64_t allowzero, node.Get<int64_t>("allowzero", 0));
  const int64_t count = NumElements(x->shape);
  int64_t known = 1;
  int infer = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      if (infer >= 0) return NodeError(node, "shape input has more than one -1");
      infer = static_cast<int>(d);
    } else if (shape[d] == 0 && allowzero == 0) {
      if (d >= x->shape.size()) {
        return NodeError(
            node, absl::StrCat("shape input copies dimension ", d, " (0) that the data of rank ",
                               x->shape.size(), " lacks"));
      }
      shape[d] = x->shape[d];
      known *= shape[d];
    } else if (shape[d] < 0) {
      return NodeError(node, absl::StrCat("shape input has a negative dimension ", shape[d]));
    } else {
      known *= shape[d];
    }
  }
  if (infer >= 0) {
    if (known == 0 || count % known != 0) {
      return NodeError(node, absl::StrCat("shape input ", ShapeString(shape), " does not fit ",
                                          count, " elements of data ", ShapeString(x->shape)));
    }
    shape[infer] = count / known;
  } else if (known != count) {
    return NodeError(node, absl::StrCat("shape input ", ShapeString(shape), " does not fit ", count,
                                        " elements of data ", ShapeString(x->shape)));
  }
  return std::make_unique<SameOrderOp>(x->dtype, shape);
}

}  // namespace easyscale::graph
