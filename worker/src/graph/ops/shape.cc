// Shape: the input's static shape as int64, dimensions [start, end) (negative
// ones count from the end, both clamped to [0, rank]).
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

class ShapeOp : public Op {
 public:
  explicit ShapeOp(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  std::vector<ValueInfo> OutputInfos() const override {
    return {{DType::kInt64, {static_cast<int64_t>(dims_.size())}}};
  }
  void Forward(RunContext&, const std::vector<const Value*>&,
               const std::vector<Value*>& out) override {
    if (out[0] != nullptr) out[0]->ints = dims_;
  }
  bool HasGradient(size_t) const override { return false; }
  void Backward(RunContext&, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>&, const std::vector<Value*>&) override {}

 private:
  std::vector<int64_t> dims_;
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeShape(const Node& node, int64_t,
                                        const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, 0, "data"));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  ES_ASSIGN_OR_RETURN(int64_t start, node.Get<int64_t>("start", 0));
  ES_ASSIGN_OR_RETURN(int64_t end, node.Get<int64_t>("end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(x->shape[d]);
  return std::make_unique<ShapeOp>(dims);
}

}  // namespace easyscale::graph
