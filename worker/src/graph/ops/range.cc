// Range: start, start + delta, ... while before limit, from scalar inputs known
// at load time (float32 or int64, all one dtype): max(ceil((limit - start) /
// delta), 0) elements, element i = start + i * delta (for float, i converted
// to float, one multiply and one add, as ONNX writes it).
#include <cmath>

#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

class RangeOp : public Op {
 public:
  explicit RangeOp(Value out) : out_(std::move(out)) {}

  std::vector<ValueInfo> OutputInfos() const override { return {{out_.dtype, out_.shape}}; }
  void Forward(RunContext&, const std::vector<const Value*>&,
               const std::vector<Value*>& out) override {
    if (out[0] != nullptr) *out[0] = out_;
  }
  bool HasGradient(size_t) const override { return false; }
  void Backward(RunContext&, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>&, const std::vector<Value*>&) override {}

 private:
  Value out_;  // all known at load time
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeRange(const Node& node, int64_t,
                                        const std::vector<OpInput>& inputs) {
  const char* names[3] = {"start", "limit", "delta"};
  const ConstantTensor* c[3];
  for (size_t i = 0; i < 3; ++i) {
    ES_ASSIGN_OR_RETURN(const ValueInfo* info, RequiredInput(node, inputs, i, names[i]));
    c[i] = inputs[i].constant;
    if (c[i] == nullptr) {
      return NodeError(node, absl::StrCat(names[i], " input is not known at load time"));
    }
    if (info->dtype != inputs[0].info->dtype || info->dtype == DType::kBool ||
        NumElements(info->shape) != 1) {
      return NodeError(
          node, absl::StrCat(names[i], " input must be one float32 or int64 like ", "start, not ",
                             ToString(info->dtype), " ", ShapeString(info->shape)));
    }
  }
  Value out;
  if (inputs[0].info->dtype == DType::kFloat32) {
    const float start = c[0]->floats[0], limit = c[1]->floats[0], delta = c[2]->floats[0];
    if (delta == 0.0f || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
      return NodeError(node, "start, limit and delta must be finite and delta nonzero");
    }
    const double n = std::ceil((static_cast<double>(limit) - start) / delta);
    out.Reset(DType::kFloat32, {n > 0 ? static_cast<int64_t>(n) : 0});
    for (size_t i = 0; i < out.floats.size(); ++i) {
      out.floats[i] = start + static_cast<float>(i) * delta;
    }
  } else {
    const int64_t start = c[0]->ints[0], limit = c[1]->ints[0], delta = c[2]->ints[0];
    if (delta == 0) return NodeError(node, "delta input is 0");
    // ceil((limit - start) / delta) in integers, for either sign of delta.
    const int64_t span = limit - start;
    int64_t n = span / delta;
    if (n * delta != span && (span > 0) == (delta > 0)) ++n;
    out.Reset(DType::kInt64, {n > 0 ? n : 0});
    for (size_t i = 0; i < out.ints.size(); ++i) {
      out.ints[i] = start + static_cast<int64_t>(i) * delta;
    }
  }
  return std::make_unique<RangeOp>(std::move(out));
}

}  // namespace easyscale::graph
