// Slice: along each axis named (all when axes is absent), the elements start,
// start + step, ... before end, from the inputs starts, ends, axes and steps
// known at load time (attributes starts, ends, axes before opset 10).
// Negative starts and ends count from the end; both are then clamped to the
// dimension as ONNX says ([0, dim] for a positive step, start to [0, dim-1]
// and end to [-1, dim-1] for a negative one). Any dtype.
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {

StatusOr<std::unique_ptr<Op>> MakeSlice(const Node& node, int64_t opset,
                                        const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, 0, "data"));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (opset >= 10) {
    ES_ASSIGN_OR_RETURN(starts, ConstantInts(node, inputs, 1, "starts"));
    ES_ASSIGN_OR_RETURN(ends, ConstantInts(node, inputs, 2, "ends"));
    if (HasInput(inputs, 3)) {
      ES_ASSIGN_OR_RETURN(axes, ConstantInts(node, inputs, 3, "axes"));
    }
    if (HasInput(inputs, 4)) {
      ES_ASSIGN_OR_RETURN(steps, ConstantInts(node, inputs, 4, "steps"));
    }
  } else {
    ES_ASSIGN_OR_RETURN(starts, node.Get<std::vector<int64_t>>("starts", {}));
    ES_ASSIGN_OR_RETURN(ends, node.Get<std::vector<int64_t>>("ends", {}));
    ES_ASSIGN_OR_RETURN(axes, node.Get<std::vector<int64_t>>("axes", {}));
  }
  if (axes.empty()) {
    for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return NodeError(node, absl::StrCat("starts, ends, axes and steps have ", starts.size(), ", ",
                                        ends.size(), ", ", axes.size(), " and ", steps.size(),
                                        " entries, not one each per sliced axis"));
  }

  Shape out = x->shape;
  const std::vector<int64_t> in_strides = Strides(x->shape);
  std::vector<int64_t> strides = in_strides;
  std::vector<bool> sliced(rank, false);
  int64_t offset = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    ES_ASSIGN_OR_RETURN(const int64_t d, NormalizeAxis(node, "axes entry", axes[i], rank));
    if (sliced[d]) return NodeError(node, absl::StrCat("axes names dimension ", d, " twice"));
    sliced[d] = true;
    const int64_t dim = x->shape[d], step = steps[i];
    if (step == 0) return NodeError(node, absl::StrCat("steps entry ", i, " is 0"));
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t len;
    if (dim == 0) {
      len = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      len = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      len = start > end ? (start - end - step - 1) / -step : 0;
    }
    out[d] = len;
    if (len > 0) offset += start * in_strides[d];
    strides[d] = step * in_strides[d];
  }
  return std::make_unique<StridedViewOp>(x->dtype, out, offset, strides);
}

}  // namespace easyscale::graph
