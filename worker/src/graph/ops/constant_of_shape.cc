// ConstantOfShape: a tensor of the shape its input gives (known at load time)
// filled with the one element of attribute value (default float 0).
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

class ConstantOfShapeOp : public Op {
 public:
  ConstantOfShapeOp(ValueInfo out, ConstantTensor value)
      : out_(std::move(out)), value_(std::move(value)) {}

  std::vector<ValueInfo> OutputInfos() const override { return {out_}; }
  void Forward(RunContext&, const std::vector<const Value*>&,
               const std::vector<Value*>& out) override {
    if (out[0] == nullptr) return;
    if (out_.dtype == DType::kFloat32) {
      std::fill(out[0]->floats.begin(), out[0]->floats.end(), value_.floats[0]);
    } else {
      std::fill(out[0]->ints.begin(), out[0]->ints.end(), value_.ints[0]);
    }
  }
  bool HasGradient(size_t) const override { return false; }
  void Backward(RunContext&, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>&, const std::vector<Value*>&) override {}

 private:
  ValueInfo out_;
  ConstantTensor value_;
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeConstantOfShape(const Node& node, int64_t,
                                                  const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ConstantInts(node, inputs, 0, "shape"));
  for (int64_t d : shape) {
    if (d < 0) return NodeError(node, absl::StrCat("shape input has a negative dimension ", d));
  }
  ConstantTensor zero;
  zero.shape = {1};
  zero.floats = {0.0f};
  ES_ASSIGN_OR_RETURN(ConstantTensor value, node.Get<ConstantTensor>("value", zero));
  if ((value.dtype == DType::kFloat32 ? value.floats.size() : value.ints.size()) != 1) {
    return NodeError(node, "attribute value must hold one element");
  }
  return std::make_unique<ConstantOfShapeOp>(ValueInfo{value.dtype, shape}, std::move(value));
}

}  // namespace easyscale::graph
