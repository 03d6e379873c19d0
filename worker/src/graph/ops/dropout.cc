// Dropout: in training, y = x * mask with mask = 1/(1-ratio) for kept
// elements and 0 for dropped ones; otherwise y = x. The optional second
// output says which elements were kept (bool).
//
// Randomness is the EST's own dropout stream, the scheme of the built-in
// models' dropout (cpu::Dropout): element i is kept when the Philox4x32 word
// (ctx.dropout_key, counter *ctx.dropout_counter + i/4, lane i%4) as a uniform
// is >= ratio, and each training forward advances the counter by ceil(n/4),
// so the mask depends on the EST, not on the machine or the thread count. The
// node's seed attribute is ignored for that reason.
//
// Dropout+Add (graph/fusion.h's FuseDropoutAdds: a residual connection):
// inputs (data, ratio, training_mode, residual), one output, residual + the
// dropped data per element as the Add summed them; the residual's gradient is
// the output's (handed on), the data's the Dropout's.
//
// Training is RunContext.training and, since opset 12, the training_mode
// input (a constant; absent means false, as ONNX). ratio (default 0.5) is a
// constant input since opset 12, an attribute before. Backward: dx = dy * scale,
// the element's (0 or 1/(1-ratio)) as the forward pass kept it (one byte an
// element).
#include "easyscale/worker/cpu_kernels.h"
#include "graph/ops/dropout_mask.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {

StatusOr<DropoutSettings> ReadDropoutSettings(const Node& node, int64_t opset,
                                              const std::vector<OpInput>& inputs) {
  DropoutSettings s;
  if (opset >= 12) {
    if (HasInput(inputs, 1)) {
      const ConstantTensor* c = inputs[1].constant;
      if (c == nullptr) return NodeError(node, "ratio input is not known at load time");
      if (c->dtype != DType::kFloat32 || c->floats.size() != 1) {
        return NodeError(node, "ratio input must be one float32");
      }
      s.ratio = c->floats[0];
    }
    s.training_mode = false;
    if (HasInput(inputs, 2)) {
      const ConstantTensor* c = inputs[2].constant;
      if (c == nullptr) return NodeError(node, "training_mode input is not known at load time");
      if (c->dtype != DType::kBool || c->ints.size() != 1) {
        return NodeError(node, "training_mode input must be one bool");
      }
      s.training_mode = c->ints[0] != 0;
    }
  } else {
    ES_ASSIGN_OR_RETURN(s.ratio, node.Get<float>("ratio", 0.5f));
  }
  if (!(s.ratio >= 0.0f && s.ratio < 1.0f)) {
    return NodeError(node, absl::StrCat("ratio ", s.ratio, " is not in [0, 1)"));
  }
  return s;
}

uint64_t DropoutMask::TakeCounter(RunContext& ctx, size_t n) {
  ES_CHECK(ctx.dropout_counter != nullptr) << "Dropout in training needs the EST's counter";
  const uint64_t at = *ctx.dropout_counter;
  *ctx.dropout_counter += (n + 3) / 4;
  return at;
}

void DropoutMask::Forward(RunContext& ctx, size_t n, const float* x, const float* residual,
                          float* y) {
  kept_.resize(n);
  cpu::Dropout(n, settings_.ratio, ctx.dropout_key.k0, ctx.dropout_key.k1, TakeCounter(ctx, n), x,
               residual, y, kept_.data());
}

void DropoutMask::Backward(size_t n, const float* dy, float* dx) const {
  cpu::DropoutBackward(n, settings_.ratio, kept_.data(), dy, dx);
}

#ifdef EASYSCALE_WITH_CUDA
cuda::DropoutDraw DropoutMask::Draw(RunContext& ctx, size_t n) const {
  return {settings_.ratio, ctx.dropout_key, ctx.dropout_counter_slot,
          TakeCounter(ctx, n) - ctx.dropout_counter_start};
}

uint8_t* DropoutMask::KeptOnDevice(RunContext& ctx, size_t n) {
  return static_cast<uint8_t*>(ctx.device->Address(nullptr, n, kept_dev_));
}
#endif

namespace {

// Dropout+Add's residual input.
constexpr size_t kResidual = 3;

class DropoutOp : public Op {
 public:
  DropoutOp(Shape shape, DropoutSettings settings, bool residual)
      : shape_(std::move(shape)), mask_(settings), residual_(residual) {}

  std::vector<ValueInfo> OutputInfos() const override {
    if (residual_) return {{DType::kFloat32, shape_}};
    return {{DType::kFloat32, shape_}, {DType::kBool, shape_}};
  }
  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    const Value& x = *in[0];
    const Value* residual = residual_ ? in[kResidual] : nullptr;
    const size_t n = x.size();
    mask_.Start(ctx);
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, x, residual, out));
    if (!mask_.dropped()) {
      if (out[0] != nullptr && residual != nullptr) {
        for (size_t i = 0; i < n; ++i) out[0]->floats[i] = residual->floats[i] + x.floats[i];
      } else if (out[0] != nullptr) {
        out[0]->floats = x.floats;
      }
      if (out.size() > 1 && out[1] != nullptr) out[1]->ints.assign(n, 1);
      return;
    }
    std::vector<float> y(n);
    mask_.Forward(ctx, n, x.floats.data(), residual != nullptr ? residual->floats.data() : nullptr,
                  y.data());
    if (out[0] != nullptr) out[0]->floats = std::move(y);
    if (out.size() > 1 && out[1] != nullptr) {
      out[1]->ints.assign(mask_.kept().begin(), mask_.kept().end());
    }
  }
  bool OutputOptional(size_t o) const override { return o == 1; }
  bool HasGradient(size_t i) const override { return i == 0 || (residual_ && i == kResidual); }
  std::optional<size_t> GradientOfOutput(size_t i) const override {
    if (residual_ && i == kResidual) return 0;
    return std::nullopt;
  }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t) const override { return false; }
  void Backward(RunContext& ctx, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (dout[0] == nullptr) return;  // the gradients are zeroed
    Value* dresidual = residual_ ? din[kResidual] : nullptr;
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, *dout[0], din[0], dresidual));
    // The residual's where the runtime did not hand dY on (a parameter's).
    if (dresidual != nullptr) dresidual->floats = dout[0]->floats;
    if (din[0] == nullptr) return;
    if (!mask_.dropped()) {
      din[0]->floats = dout[0]->floats;
      return;
    }
    mask_.Backward(dout[0]->size(), dout[0]->floats.data(), din[0]->floats.data());
  }

  bool RunsOnDevice() const override { return true; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  void ForwardOnDevice(RunContext& ctx, const Value& x, const Value* residual,
                       const std::vector<Value*>& out) {
    const size_t n = x.size();
    Value* y = out[0];
    Value* mask = out.size() > 1 ? out[1] : nullptr;
    const float* r = residual != nullptr ? DeviceData(ctx, *residual) : nullptr;
    if (!mask_.dropped()) {
      if (y != nullptr && r != nullptr) {
        CheckLaunch(cuda::Add(n, r, DeviceData(ctx, x), DeviceData(ctx, *y), StreamOf(ctx)),
                    "Dropout+Add");
      } else if (y != nullptr) {
        ctx.device->Copy(x.bytes(), DeviceData(ctx, x), DeviceData(ctx, *y));
      }
    } else {
      CheckLaunch(cuda::Dropout(n, mask_.Draw(ctx, n), DeviceData(ctx, x), r,
                                y != nullptr ? DeviceData(ctx, *y) : DeviceScratch(ctx, y_dev_, n),
                                mask_.KeptOnDevice(ctx, n), StreamOf(ctx)),
                  "Dropout");
    }
    if (mask == nullptr) return;
    CheckLaunch(
        cuda_ops::DropoutMaskOutput(n, mask_.dropped() ? mask_.KeptOnDevice(ctx, n) : nullptr,
                                    DeviceData<int64_t>(ctx, *mask), StreamOf(ctx)),
        "Dropout mask");
  }
  void BackwardOnDevice(RunContext& ctx, const Value& dy, Value* dx, Value* dresidual) {
    if (dresidual != nullptr) {
      ctx.device->Copy(dy.bytes(), DeviceData(ctx, dy), DeviceData(ctx, *dresidual));
    }
    if (dx == nullptr) return;
    if (!mask_.dropped()) {
      ctx.device->Copy(dy.bytes(), DeviceData(ctx, dy), DeviceData(ctx, *dx));
      return;
    }
    CheckLaunch(cuda::DropoutBackward(dy.size(), mask_.ratio(), mask_.KeptOnDevice(ctx, dy.size()),
                                      DeviceData(ctx, dy), DeviceData(ctx, *dx), StreamOf(ctx)),
                "Dropout gradient");
  }
#endif

  Shape shape_;
  DropoutMask mask_;
  bool residual_;       // a Dropout+Add
  DeviceMirror y_dev_;  // on a device: an unread output
};

StatusOr<std::unique_ptr<Op>> MakeDropoutOp(const Node& node, int64_t opset,
                                            const std::vector<OpInput>& inputs, bool residual) {
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "data", DType::kFloat32));
  ES_ASSIGN_OR_RETURN(const DropoutSettings settings, ReadDropoutSettings(node, opset, inputs));
  return std::make_unique<DropoutOp>(inputs[0].info->shape, settings, residual);
}

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeDropout(const Node& node, int64_t opset,
                                          const std::vector<OpInput>& inputs) {
  return MakeDropoutOp(node, opset, inputs, /*residual=*/false);
}

StatusOr<std::unique_ptr<Op>> MakeDropoutAdd(const Node& node, int64_t opset,
                                             const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, kResidual, "residual", DType::kFloat32));
  if (inputs[kResidual].info->shape != inputs[0].info->shape) {
    return NodeError(node, "residual's shape differs from data's");
  }
  return MakeDropoutOp(node, opset, inputs, /*residual=*/true);
}

}  // namespace easyscale::graph
