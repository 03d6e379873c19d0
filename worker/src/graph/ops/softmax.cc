// Softmax and LogSoftmax (ONNX), float32. From opset 13 each slice along
// `axis` (default -1) is one row; before opset 13 the input is seen as 2-D at
// `axis` (default 1) and each of its rows is one.
//
// Order, per row, elements in ascending index along the row:
//   m = max (a NaN is kept only where it comes first); e_j = detmath::Exp(x_j - m);
//   s = sum of e_j from +0; Softmax y_j = e_j / s; LogSoftmax y_j = (x_j - m) - Log(s).
// Backward, per row: Softmax t = sum of dy_j * y_j from +0, dx_j = y_j * (dy_j - t);
//   LogSoftmax t = sum of dy_j from +0, dx_j = dy_j - Exp(y_j) * t.
//
// Mul+Softmax (graph/fusion.h's FuseScaledSoftmax: attention's scores times
// their scale, then their softmax): x_j = a_j * scale (MulFormula) before the
// row's order, and da_j = dx_j * scale (MulFormula's gradient) after it: the
// Mul's and the Softmax's bits.
//
// Softmax+Dropout (graph/fusion.h's FuseSoftmaxDropouts: the attention's
// probabilities dropped; "scale" where the Softmax was a Mul+Softmax): inputs
// (x, ratio, training_mode), outputs (the dropped probabilities, the
// probabilities), the Dropout's draw at the Softmax's place (dropout_mask.h);
// backward, dy = the dropped output's gradient times each element's dropout
// scale (the Dropout's gradient) before the rows' order.
#include "graph/ops/softmax.h"

#include <algorithm>
#include <optional>

#include "graph/ops/dropout_mask.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#include "graph/ops/row_formulas.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

class SoftmaxOp final : public Op {
 public:
  // Rows are (outer, inner) pairs; a row's n elements are `inner` apart.
  SoftmaxOp(Shape shape, int64_t outer, int64_t n, int64_t inner, bool log, SoftmaxScale scale,
            std::optional<DropoutSettings> dropout)
      : shape_(std::move(shape)), outer_(outer), n_(n), inner_(inner), log_(log), scale_(scale) {
    if (dropout) dropout_.emplace(*dropout);
  }

  // Softmax+Dropout: (the dropped probabilities, the probabilities).
  std::vector<ValueInfo> OutputInfos() const override {
    if (dropout_) return {{DType::kFloat32, shape_}, {DType::kFloat32, shape_}};
    return {{DType::kFloat32, shape_}};
  }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    if (dropout_) dropout_->Start(ctx);
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, *in[0], out));
    const float* x = in[0]->floats.data();
    Value& probabilities = *out[dropout_ ? kProbabilities : 0];
    float* y = probabilities.floats.data();
    if (scale_.given) {  // the scaled input in y, the rows then in place
      for (size_t e = 0; e < probabilities.floats.size(); ++e) y[e] = scale_.Input(x[e]);
      x = y;
    }
    ForEachRow([&](int64_t base) { SoftmaxRow(x + base, y + base, n_, inner_, log_); });
    if (!dropout_) return;
    if (dropout_->dropped()) {
      dropout_->Forward(ctx, probabilities.size(), y, nullptr, out[0]->floats.data());
    } else {
      out[0]->floats = probabilities.floats;
    }
  }

  bool HasGradient(size_t i) const override { return i == 0; }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t j) const override { return !dropout_ || j == kProbabilities; }

  void Backward(RunContext& ctx, const std::vector<const Value*>&,
                const std::vector<const Value*>& out, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    if (din[0] == nullptr) return;
    const Value& probabilities = *out[dropout_ ? kProbabilities : 0];
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, probabilities, dout[0], *din[0]));
    float* dx = din[0]->floats.data();
    if (dout[0] == nullptr) {
      std::fill(din[0]->floats.begin(), din[0]->floats.end(), 0.0f);
      return;
    }
    const float* y = probabilities.floats.data();
    const float* dy = dout[0]->floats.data();
    if (dropout_ && dropout_->dropped()) {  // the Dropout's gradient, the rows' then in place
      dropout_->Backward(din[0]->size(), dy, dx);
      dy = dx;
    }
    ForEachRow([&](int64_t base) {
      SoftmaxRowGradient(y + base, dy + base, dx + base, n_, inner_, log_);
    });
    if (scale_.given) {
      for (float& d : din[0]->floats) d = scale_.Gradient(d);
    }
  }

  bool RunsOnDevice() const override { return true; }

 private:
  static constexpr size_t kProbabilities = 1;  // Softmax+Dropout's second output

#ifdef EASYSCALE_WITH_CUDA
  void ForwardOnDevice(RunContext& ctx, const Value& x, const std::vector<Value*>& out) {
    const size_t count = x.size();
    Value& probabilities = *out[dropout_ ? kProbabilities : 0];
    cuda_ops::SoftmaxDropout dropped;
    const bool drops = dropout_ && dropout_->dropped();
    if (drops) {
      dropped = {dropout_->Draw(ctx, count), DeviceData(ctx, *out[0]),
                 dropout_->KeptOnDevice(ctx, count)};
    }
    CheckLaunch(cuda_ops::SoftmaxForward(static_cast<size_t>(outer_), static_cast<size_t>(n_),
                                         static_cast<size_t>(inner_), log_, scale_,
                                         DeviceData(ctx, x), DeviceData(ctx, probabilities),
                                         drops ? &dropped : nullptr, StreamOf(ctx)),
                "Softmax");
    if (dropout_ && !drops) {
      ctx.device->Copy(probabilities.bytes(), DeviceData(ctx, probabilities),
                       DeviceData(ctx, *out[0]));
    }
  }
  void BackwardOnDevice(RunContext& ctx, const Value& y, const Value* dy, Value& dx) {
    if (dy == nullptr) return;  // dx is zeroed
    cuda_ops::SoftmaxDropout dropped;
    const bool drops = dropout_ && dropout_->dropped();
    if (drops) dropped = {{dropout_->ratio()}, nullptr, dropout_->KeptOnDevice(ctx, y.size())};
    CheckLaunch(
        cuda_ops::SoftmaxBackward(static_cast<size_t>(outer_), static_cast<size_t>(n_),
                                  static_cast<size_t>(inner_), log_, scale_, DeviceData(ctx, y),
                                  DeviceData(ctx, *dy), drops ? &dropped : nullptr,
                                  DeviceData(ctx, dx), StreamOf(ctx)),
        "Softmax gradient");
  }
#endif

  // Calls f(index of the row's first element) for every row.
  template <typename F>
  void ForEachRow(F&& f) const {
    for (int64_t o = 0; o < outer_; ++o) {
      for (int64_t i = 0; i < inner_; ++i) f(o * n_ * inner_ + i);
    }
  }

  Shape shape_;
  int64_t outer_, n_, inner_;
  bool log_;
  SoftmaxScale scale_;
  std::optional<DropoutMask> dropout_;  // a Softmax+Dropout
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeSoftmaxOp(const Node& node, int64_t opset,
                                            const std::vector<OpInput>& inputs, bool log,
                                            std::optional<float> scale,
                                            std::optional<DropoutSettings> dropout) {
  // Softmax+Dropout: the Dropout's ratio and training_mode, two outputs.
  ES_RETURN_IF_ERROR(dropout ? CheckArity(node, inputs, 1, 3, 2)
                             : CheckArity(node, inputs, 1, 1, 1));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "input", DType::kFloat32));
  const Shape& shape = inputs[0].info->shape;
  ES_ASSIGN_OR_RETURN(const int64_t axis_attr, node.Get<int64_t>("axis", opset >= 13 ? -1 : 1));
  // A scalar is one row of one element.
  ES_ASSIGN_OR_RETURN(const size_t axis, NormalizeAxis(node, "attribute axis", axis_attr,
                                                       std::max<size_t>(shape.size(), 1)));
  int64_t outer = 1, n = 1, inner = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d < axis) {
      outer *= shape[d];
    } else if (d == axis || opset < 13) {
      n *= shape[d];
    } else {
      inner *= shape[d];
    }
  }
  if (n == 0) outer = 0;  // no rows to read a first element from
  SoftmaxScale row_scale;
  if (scale) row_scale = {true, *scale};
  return std::unique_ptr<Op>(new SoftmaxOp(shape, outer, n, inner, log, row_scale, dropout));
}

StatusOr<std::unique_ptr<Op>> MakeSoftmax(const Node& node, int64_t opset,
                                          const std::vector<OpInput>& inputs) {
  return MakeSoftmaxOp(node, opset, inputs, /*log=*/false);
}

StatusOr<std::unique_ptr<Op>> MakeScaledSoftmax(const Node& node, int64_t opset,
                                                const std::vector<OpInput>& inputs) {
  if (node.attributes.count("scale") == 0) return NodeError(node, "attribute scale is missing");
  ES_ASSIGN_OR_RETURN(const float scale, node.Get<float>("scale", 1.0f));
  return MakeSoftmaxOp(node, opset, inputs, /*log=*/false, scale);
}

StatusOr<std::unique_ptr<Op>> MakeSoftmaxDropout(const Node& node, int64_t opset,
                                                 const std::vector<OpInput>& inputs) {
  std::optional<float> scale;
  if (node.attributes.count("scale") != 0) {
    ES_ASSIGN_OR_RETURN(scale, node.Get<float>("scale", 1.0f));
  }
  ES_ASSIGN_OR_RETURN(const DropoutSettings dropout, ReadDropoutSettings(node, opset, inputs));
  return MakeSoftmaxOp(node, opset, inputs, /*log=*/false, scale, dropout);
}

}  // namespace easyscale::graph
