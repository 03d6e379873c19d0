// ReduceMean (ONNX), float32: the mean over `axes` (attribute before opset
// 18, the optional second input from opset 18, which must be a constant);
// no axes reduce every dimension, or none with noop_with_empty_axes (opset
// 18). keepdims (default 1) keeps the reduced dimensions as 1s.
//
// Order: each output element is (sum of its input elements from +0, in
// ascending input index) / count, count the number of elements it reduces
// (broadcast.h's ReduceToOperand from the input to the kept-dims shape).
// Backward has no reductions: dx = dy of its output element / count.
#include <algorithm>
#include <utility>

#include "graph/ops/broadcast.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

class ReduceMeanOp final : public Op {
 public:
  // `bc` broadcasts X's shape with the kept-dims output shape (its b operand).
  ReduceMeanOp(Broadcast bc, Shape out, int64_t count)
      : bc_(std::move(bc)), out_(std::move(out)), count_(static_cast<float>(count)) {}

  std::vector<ValueInfo> OutputInfos() const override { return {{DType::kFloat32, out_}}; }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(
        ctx, CheckLaunch(cuda_ops::ReduceMeanForward(DeviceDims(bc_), out[0]->size(), count_,
                                                     DeviceData(ctx, *in[0]),
                                                     DeviceData(ctx, *out[0]), StreamOf(ctx)),
                         "ReduceMean"));
    const std::vector<float>& x = in[0]->floats;
    std::vector<float>& y = out[0]->floats;
    ReduceToOperand(
        bc_, 1, [&](int64_t o, int64_t, int64_t) { return x[o]; }, y);
    for (float& v : y) v = v / count_;
  }

  bool HasGradient(size_t i) const override { return i == 0; }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (din[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, dout[0], *din[0]));
    std::vector<float>& dx = din[0]->floats;
    if (dout[0] == nullptr) {
      std::fill(dx.begin(), dx.end(), 0.0f);
      return;
    }
    const std::vector<float>& dy = dout[0]->floats;
    ForEachBroadcast(bc_, [&](int64_t o, int64_t, int64_t iy) { dx[o] = dy[iy] / count_; });
  }

  bool RunsOnDevice() const override { return bc_.out.size() <= kMaxDeviceRank; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  void BackwardOnDevice(RunContext& ctx, const Value* dy, Value& dx) {
    if (dy == nullptr) return;  // dx is zeroed
    CheckLaunch(
        cuda_ops::ReduceMeanBackward(DeviceDims(bc_), dx.size(), count_, DeviceData(ctx, *dy),
                                     DeviceData(ctx, dx), StreamOf(ctx)),
        "ReduceMean gradient");
  }
#endif

  Broadcast bc_;
  Shape out_;
  float count_;
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeReduceMean(const Node& node, int64_t opset,
                                             const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 1, opset >= 18 ? 2 : 1, 1));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "data", DType::kFloat32));
  const Shape& shape = inputs[0].info->shape;
  std::vector<int64_t> axes;
  if (opset < 18) {
    ES_ASSIGN_OR_RETURN(axes, node.Get<std::vector<int64_t>>("axes", {}));
  } else {
    if (node.attributes.count("axes") != 0) {
      return NodeError(node, "attribute axes is input 1 from opset 18 on");
    }
    if (inputs.size() > 1 && inputs[1].info != nullptr) {
      ES_RETURN_IF_ERROR(CheckDType(node, inputs, 1, "axes", DType::kInt64));
      if (inputs[1].constant == nullptr) {
        return NodeError(node, absl::StrCat("input axes (", node.inputs[1], ") is not a constant"));
      }
      axes = inputs[1].constant->ints;
    }
  }
  ES_ASSIGN_OR_RETURN(const int64_t keepdims, node.Get<int64_t>("keepdims", 1));
  ES_ASSIGN_OR_RETURN(const int64_t noop, node.Get<int64_t>("noop_with_empty_axes", 0));
  std::vector<bool> reduced(shape.size(), axes.empty() && noop == 0);
  for (int64_t a : axes) {
    ES_ASSIGN_OR_RETURN(const size_t d, NormalizeAxis(node, "axis", a, shape.size()));
    if (reduced[d]) return NodeError(node, absl::StrCat("axis ", a, " is repeated"));
    reduced[d] = true;
  }
  Shape kept = shape, out;
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) {
      count *= shape[d];
      kept[d] = 1;
    }
    if (!reduced[d] || keepdims != 0) out.push_back(kept[d]);
  }
  ES_ASSIGN_OR_RETURN(Broadcast bc, MakeBroadcast(node, shape, kept));
  return std::unique_ptr<Op>(new ReduceMeanOp(std::move(bc), std::move(out), count));
}

}  // namespace easyscale::graph
