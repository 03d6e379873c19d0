// Clip (ONNX): Y = min(max(X, lo), hi), float32. The bounds are the optional
// scalar inputs min and max (opset 11 on; constants or not, read as the pass
// runs), or the attributes min and max (before opset 11); an absent bound is
// -inf or +inf. NaN stays NaN.
//
// No reductions. dX = dY where lo <= X <= hi, else 0 (PyTorch's clamp rule);
// the bounds have no gradient.
#include <algorithm>
#include <limits>
#include <utility>

#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

class ClipOp final : public Op {
 public:
  ClipOp(Shape shape, float lo, float hi) : shape_(std::move(shape)), lo_(lo), hi_(hi) {}

  std::vector<ValueInfo> OutputInfos() const override { return {{DType::kFloat32, shape_}}; }

  void Forward(RunContext&, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    if (in.size() > 1 && in[1] != nullptr) lo_ = in[1]->floats[0];
    if (in.size() > 2 && in[2] != nullptr) hi_ = in[2]->floats[0];
    const std::vector<float>& x = in[0]->floats;
    std::vector<float>& y = out[0]->floats;
    for (size_t i = 0; i < x.size(); ++i) {
      const float v = x[i] < lo_ ? lo_ : x[i];
      y[i] = v > hi_ ? hi_ : v;
    }
  }

  bool HasGradient(size_t i) const override { return i == 0; }

  void Backward(RunContext&, const std::vector<const Value*>& in, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (din[0] == nullptr) return;
    std::vector<float>& dx = din[0]->floats;
    if (dout[0] == nullptr) {
      std::fill(dx.begin(), dx.end(), 0.0f);
      return;
    }
    // Plain pointers and local bounds so the select vectorises.
    const float* __restrict x = in[0]->floats.data();
    const float* __restrict dy = dout[0]->floats.data();
    float* __restrict d = dx.data();
    const float lo = lo_, hi = hi_;
    for (size_t i = 0, n = dx.size(); i < n; ++i) {
      d[i] = x[i] >= lo && x[i] <= hi ? dy[i] : 0.0f;
    }
  }

 private:
  Shape shape_;
  float lo_, hi_;  // the attributes', or Forward's inputs' for Backward
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeClip(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 1, opset >= 11 ? 3 : 1, 1));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "input", DType::kFloat32));
  float bounds[2] = {-std::numeric_limits<float>::infinity(),
                     std::numeric_limits<float>::infinity()};
  const char* names[2] = {"min", "max"};
  for (size_t k = 0; k < 2; ++k) {
    if (opset < 11) {
      ES_ASSIGN_OR_RETURN(bounds[k], node.Get<float>(names[k], bounds[k]));
      continue;
    }
    if (node.attributes.count(names[k]) != 0) {
      return NodeError(
          node, absl::StrCat("attribute ", names[k], " is input ", k + 1, " from opset 11 on"));
    }
    const OpInput& bound = inputs.size() > k + 1 ? inputs[k + 1] : OpInput{};
    if (bound.info == nullptr) continue;
    ES_RETURN_IF_ERROR(CheckDType(node, inputs, k + 1, names[k], DType::kFloat32));
    if (NumElements(bound.info->shape) != 1) {
      return NodeError(
          node, absl::StrCat("input ", names[k], " (", node.inputs[k + 1], ") is not a scalar"));
    }
  }
  return std::unique_ptr<Op>(new ClipOp(inputs[0].info->shape, bounds[0], bounds[1]));
}

}  // namespace easyscale::graph
