// GlobalAveragePool: the mean over every dimension after N and C.
//
// Operation order: y[n, c] = s / P, s the sum from 0 of the P elements of
// (n, c) in row-major order. Backward: dx = dy[n, c] / P.
#include <utility>
#include <vector>

#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

class GlobalAveragePool final : public Op {
 public:
  explicit GlobalAveragePool(Shape x) : x_(std::move(x)) {
    planes_ = x_[0] * x_[1];
    positions_ = NumElements(x_) / planes_;
  }

  std::vector<ValueInfo> OutputInfos() const override {
    Shape y(x_.size(), 1);
    y[0] = x_[0];
    y[1] = x_[1];
    return {{DType::kFloat32, y}};
  }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(ctx, CheckLaunch(cuda_ops::GlobalAveragePoolForward(
                                          Planes(), Positions(), DeviceData(ctx, *in[0]),
                                          DeviceData(ctx, *out[0]), StreamOf(ctx)),
                                      "GlobalAveragePool"));
    const float* x = in[0]->floats.data();
    const float count = static_cast<float>(positions_);
    for (int64_t pl = 0; pl < planes_; ++pl) {
      float sum = 0.0f;
      for (int64_t p = 0; p < positions_; ++p) sum += x[pl * positions_ + p];
      out[0]->floats[pl] = sum / count;
    }
  }

  bool HasGradient(size_t i) const override { return i == 0; }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (dout[0] == nullptr || din[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, CheckLaunch(cuda_ops::GlobalAveragePoolBackward(
                                          Planes(), Positions(), DeviceData(ctx, *dout[0]),
                                          DeviceData(ctx, *din[0]), StreamOf(ctx)),
                                      "GlobalAveragePool gradient"));
    const float count = static_cast<float>(positions_);
    float* dx = din[0]->floats.data();
    for (int64_t pl = 0; pl < planes_; ++pl) {
      const float g = dout[0]->floats[pl] / count;
      std::fill(dx + pl * positions_, dx + (pl + 1) * positions_, g);
    }
  }

  bool RunsOnDevice() const override { return true; }

 private:
  size_t Planes() const { return static_cast<size_t>(planes_); }
  size_t Positions() const { return static_cast<size_t>(positions_); }

  Shape x_;
  int64_t planes_ = 0, positions_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeGlobalAveragePool(const Node& node, int64_t,
                                                    const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 1, 1, 1));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "X", DType::kFloat32));
  const Shape& x = inputs[0].info->shape;
  if (x.size() < 3) {
    return NodeError(
        node, absl::StrCat("input X must be at least 3-D (N, C, D1, ...), not rank ", x.size()));
  }
  if (NumElements(x) == 0) return NodeError(node, "input X is empty");
  return std::unique_ptr<Op>(new GlobalAveragePool(x));
}

}  // namespace easyscale::graph
