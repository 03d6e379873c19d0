// File: worker/src/graph/ops/unary_elementwise.h
//
// The element-wise unary float32 ops (Relu, Sqrt, Erf, Gelu, Tanh, Sigmoid) as one
// op over a formula (a struct in elementwise_formulas.h); each op's file has
// the factory:
//
//   struct ReluFormula {
//     static float Apply(float x);
//     static float Grad(float x, float y, float dy);  // dx from x, y and dy
//   };
//
// No reductions: one formula evaluation per element, forward and backward.
#pragma once

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/node_checks.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {

template <typename F>
class UnaryElementwiseOp final : public Op {
 public:
  explicit UnaryElementwiseOp(Shape shape) : shape_(std::move(shape)) {}

  std::vector<ValueInfo> OutputInfos() const override { return {{DType::kFloat32, shape_}}; }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, *in[0], *out[0]));
    const std::vector<float>& x = in[0]->floats;
    std::vector<float>& y = out[0]->floats;
    for (size_t i = 0; i < x.size(); ++i) y[i] = F::Apply(x[i]);
  }

  bool HasGradient(size_t i) const override { return i == 0; }

  void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                const std::vector<const Value*>& out, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    if (din[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, *in[0], *out[0], dout[0], *din[0]));
    std::vector<float>& dx = din[0]->floats;
    if (dout[0] == nullptr) {
      std::fill(dx.begin(), dx.end(), 0.0f);
      return;
    }
    const float* x = in[0]->floats.data();
    const float* y = out[0]->floats.data();
    const float* dy = dout[0]->floats.data();
    for (size_t i = 0; i < dx.size(); ++i) dx[i] = UnaryGrad<F>(x, y, dy, static_cast<int64_t>(i));
  }

  bool BackwardReadsInput(size_t) const override { return F::kGradReadsX; }
  bool BackwardReadsOutput(size_t) const override { return F::kGradReadsY; }

  bool RunsOnDevice() const override { return true; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  void ForwardOnDevice(RunContext& ctx, const Value& x, Value& y) {
    CheckLaunch(
        cuda_ops::UnaryForward<F>(x.size(), DeviceData(ctx, x), DeviceData(ctx, y), StreamOf(ctx)),
        "element-wise op");
  }
  void BackwardOnDevice(RunContext& ctx, const Value& x, const Value& y, const Value* dy,
                        Value& dx) {
    if (dy == nullptr) return;  // dx is zeroed
    CheckLaunch(
        cuda_ops::UnaryBackward<F>(x.size(), F::kGradReadsX ? DeviceData(ctx, x) : nullptr,
                                   F::kGradReadsY ? DeviceData(ctx, y) : nullptr,
                                   DeviceData(ctx, *dy), DeviceData(ctx, dx), StreamOf(ctx)),
        "element-wise op gradient");
  }
#endif

  Shape shape_;
};

// One float32 input X, one output Y of X's shape.
template <typename F>
StatusOr<std::unique_ptr<Op>> MakeUnaryElementwise(const Node& node,
                                                   const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 1, 1, 1));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "0", DType::kFloat32));
  return std::unique_ptr<Op>(new UnaryElementwiseOp<F>(inputs[0].info->shape));
}

}  // namespace easyscale::graph
