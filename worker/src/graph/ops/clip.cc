// Clip (ONNX): Y = min(max(X, lo), hi), float32. The bounds are the optional
// scalar inputs min and max (opset 11 on; constants or not, read as the pass
// runs), or the attributes min and max (before opset 11); an absent bound is
// -inf or +inf. NaN stays NaN.
//
// No reductions. dX = dY where lo <= X <= hi, else 0 (PyTorch's clamp rule);
// the bounds have no gradient. A device runs bounds known at load time only.
#include <algorithm>
#include <limits>
#include <utility>

#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

class ClipOp final : public Op {
 public:
  // constant_bounds: the bounds are known now (attributes, constant inputs or
  // absent), which a device needs (it does not read bound inputs).
  ClipOp(Shape shape, float lo, float hi, bool constant_bounds)
      : shape_(std::move(shape)), lo_(lo), hi_(hi), constant_bounds_(constant_bounds) {}

  std::vector<ValueInfo> OutputInfos() const override { return {{DType::kFloat32, shape_}}; }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(
        ctx, CheckLaunch(cuda_ops::ClipForward(in[0]->size(), lo_, hi_, DeviceData(ctx, *in[0]),
                                               DeviceData(ctx, *out[0]), StreamOf(ctx)),
                         "Clip"));
    if (in.size() > 1 && in[1] != nullptr) lo_ = in[1]->floats[0];
    if (in.size() > 2 && in[2] != nullptr) hi_ = in[2]->floats[0];
    const std::vector<float>& x = in[0]->floats;
    std::vector<float>& y = out[0]->floats;
    for (size_t i = 0; i < x.size(); ++i) y[i] = formulas::Clip(x[i], lo_, hi_);
  }

  bool HasGradient(size_t i) const override { return i == 0; }
  bool BackwardReadsInput(size_t) const override { return true; }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                const std::vector<const Value*>&, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    if (din[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, *in[0], dout[0], *din[0]));
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
      d[i] = formulas::ClipGrad(x[i], dy[i], lo, hi);
    }
  }

  bool RunsOnDevice() const override { return constant_bounds_; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  void BackwardOnDevice(RunContext& ctx, const Value& x, const Value* dy, Value& dx) {
    if (dy == nullptr) return;  // dx is zeroed
    CheckLaunch(cuda_ops::ClipBackward(x.size(), lo_, hi_, DeviceData(ctx, x), DeviceData(ctx, *dy),
                                       DeviceData(ctx, dx), StreamOf(ctx)),
                "Clip gradient");
  }
#endif

  Shape shape_;
  float lo_, hi_;  // the attributes', or Forward's inputs' for Backward
  bool constant_bounds_;
};

}  // namespace

StatusOr<ClipBounds> ResolveClipBounds(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs, size_t first) {
  ClipBounds b{-std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
               true};
  float* bounds[2] = {&b.lo, &b.hi};
  const char* names[2] = {"min", "max"};
  for (size_t k = 0; k < 2; ++k) {
    if (opset < 11) {
      ES_ASSIGN_OR_RETURN(*bounds[k], node.Get<float>(names[k], *bounds[k]));
      continue;
    }
    if (node.attributes.count(names[k]) != 0) {
      return NodeError(
          node, absl::StrCat("attribute ", names[k], " is input ", first + k, " from opset 11 on"));
    }
    const size_t at = first + k;
    const OpInput& bound = inputs.size() > at ? inputs[at] : OpInput{};
    if (bound.info == nullptr) continue;
    ES_RETURN_IF_ERROR(CheckDType(node, inputs, at, names[k], DType::kFloat32));
    if (NumElements(bound.info->shape) != 1) {
      return NodeError(
          node, absl::StrCat("input ", names[k], " (", node.inputs[at], ") is not a scalar"));
    }
    if (bound.constant == nullptr) {
      b.constant = false;
    } else {
      *bounds[k] = bound.constant->floats[0];
    }
  }
  return b;
}

StatusOr<std::unique_ptr<Op>> MakeClip(const Node& node, int64_t opset,
                                       const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 1, opset >= 11 ? 3 : 1, 1));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "input", DType::kFloat32));
  ES_ASSIGN_OR_RETURN(const ClipBounds bounds, ResolveClipBounds(node, opset, inputs, 1));
  return std::unique_ptr<Op>(
      new ClipOp(inputs[0].info->shape, bounds.lo, bounds.hi, bounds.constant));
}

}  // namespace easyscale::graph
