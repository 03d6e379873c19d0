// Cast: each element converted to `to` (ONNX's FLOAT, INT64 or BOOL) from
// float32, int64 or bool. float -> int64 truncates toward zero, as ONNX; what
// ONNX leaves undefined is fixed here so every machine agrees: NaN gives 0 and
// values beyond int64's range its limits. To bool: nonzero (NaN too) is true.
// The gradient passes through float -> float only.
#include <limits>

#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

// ONNX TensorProto.DataType codes.
constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxInt64 = 7;
constexpr int64_t kOnnxBool = 9;

int64_t FloatToInt64(float f) {
  if (f != f) return 0;
  // 2^63 is exact in float; within (-2^63, 2^63) the conversion truncates.
  if (f >= 9223372036854775808.0f) return std::numeric_limits<int64_t>::max();
  if (f <= -9223372036854775808.0f) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(f);
}

class CastOp : public Op {
 public:
  CastOp(DType from, ValueInfo out) : from_(from), out_(std::move(out)) {}

  std::vector<ValueInfo> OutputInfos() const override { return {out_}; }
  void Forward(RunContext&, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    if (out[0] == nullptr) return;
    const Value& x = *in[0];
    Value& y = *out[0];
    const size_t n = x.size();
    if (from_ == DType::kFloat32) {
      for (size_t i = 0; i < n; ++i) {
        if (out_.dtype == DType::kFloat32) {
          y.floats[i] = x.floats[i];
        } else if (out_.dtype == DType::kInt64) {
          y.ints[i] = FloatToInt64(x.floats[i]);
        } else {
          y.ints[i] = x.floats[i] != 0.0f ? 1 : 0;
        }
      }
      return;
    }
    for (size_t i = 0; i < n; ++i) {  // int64 or bool (0/1)
      if (out_.dtype == DType::kFloat32) {
        y.floats[i] = static_cast<float>(x.ints[i]);  // round to nearest even
      } else if (out_.dtype == DType::kInt64) {
        y.ints[i] = x.ints[i];
      } else {
        y.ints[i] = x.ints[i] != 0 ? 1 : 0;
      }
    }
  }
  bool HasGradient(size_t i) const override {
    return i == 0 && from_ == DType::kFloat32 && out_.dtype == DType::kFloat32;
  }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t) const override { return false; }
  void Backward(RunContext&, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (din[0] != nullptr && dout[0] != nullptr) din[0]->floats = dout[0]->floats;
  }

 private:
  DType from_;
  ValueInfo out_;
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeCast(const Node& node, int64_t,
                                       const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, 0, "input"));
  if (node.attributes.count("to") == 0) return NodeError(node, "attribute to is missing");
  ES_ASSIGN_OR_RETURN(const int64_t to, node.Get<int64_t>("to", 0));
  ValueInfo out = {DType::kFloat32, x->shape};
  switch (to) {
    case kOnnxFloat:
      break;
    case kOnnxInt64:
      out.dtype = DType::kInt64;
      break;
    case kOnnxBool:
      out.dtype = DType::kBool;
      break;
    default:
      return NodeError(node, absl::StrCat("attribute to ", to,
                                          " is not supported (FLOAT 1, INT64 7 and BOOL 9 are)"));
  }
  return std::make_unique<CastOp>(x->dtype, out);
}

}  // namespace easyscale::graph
