// BatchNormalization over X [N, C, ...] per channel, as cpu::BatchNorm* run it
// on the [N, C, P] view (P: the product of the dimensions after C, 1 for 2-D).
//
// Forms: opset 14+ reads training_mode (1: outputs Y, running_mean,
// running_var); before 14 the node trains when any of outputs 1..4
// (running_mean, running_var, saved_mean, saved_var) is present. A training
// node uses the batch's statistics when the pass trains (RunContext.training)
// and the running ones otherwise; an inference node always the running ones.
//
// Operation order (channel sum: per sample a chain over p ascending from 0,
// then the samples' results added in sample order, cpu_kernels.h):
//   mean = channel sum of x / (N*P); var = channel sum of fma-chained (x-mean)^2
//   / (N*P) (biased, normalises Y); y = fma(x - mean, scale * invstd, B) with
//   invstd = 1 / sqrt(var + epsilon) (kernel_formulas.h BatchNormOutput).
//   running = (1 - mom) * running + mom * batch, mom = 1 - momentum (exact for
//   momentum >= 0.5, as PyTorch's 0.9), and the batch variance here is the
//   UNBIASED one (sum / (N*P - 1)) as in PyTorch, not ONNX's biased one: a
//   model trained here keeps PyTorch's running statistics. saved_var (opset
//   < 14) is the biased batch variance.
//   Backward (batch statistics): dB = channel sum of dy, dscale = channel sum of
//   fma-chained dy * xhat (one pass, both sums), dx by BatchNormInputGrad.
//   Backward (running statistics): the same sums; dx = dy * (scale * invstd).
//   Gradients into outputs 1..4 are not propagated (they are statistics).
//
// BatchNormalization+Relu and BatchNormalization+Clip (graph/fusion.h's
// FuseBatchNormActivations; the Clip's bounds as its inputs 5 and 6, or
// attributes min and max before opset 11): output 0 is the activation of each
// y (formulas::Activation, as the Relu or Clip computed it); backward, dy is
// first the activation's rule, from y recomputed from x as the forward pass
// computed it (so neither y nor the output is kept for it).
#include <utility>
#include <vector>

#include "easyscale/worker/cpu_kernels.h"
#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

class BatchNormalization final : public Op {
 public:
  BatchNormalization(Shape x, size_t num_outputs, bool trains, bool saved_outputs, float epsilon,
                     float momentum, formulas::Activation activation)
      : x_(std::move(x)),
        num_outputs_(num_outputs),
        trains_(trains),
        saved_outputs_(saved_outputs),
        epsilon_(epsilon),
        momentum_(momentum),
        activation_(activation) {
    batch_ = static_cast<int>(x_[0]);
    channels_ = static_cast<int>(x_[1]);
    positions_ = static_cast<int>(NumElements(x_) / (x_[0] * x_[1]));
  }

  std::vector<ValueInfo> OutputInfos() const override {
    std::vector<ValueInfo> infos(num_outputs_, {DType::kFloat32, {x_[1]}});
    infos[0].shape = x_;
    return infos;
  }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    const float* x = in[0]->floats.data();
    const float* scale = in[1]->floats.data();
    const float* bias = in[2]->floats.data();
    const std::vector<float>& mean_in = in[3]->floats;
    const std::vector<float>& var_in = in[4]->floats;
    float* y = out[0]->floats.data();
    batch_stats_ = ctx.training && trains_;
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, in, out));
    if (!batch_stats_) {
      cpu::BatchNormEval(batch_, channels_, positions_, x, scale, bias, epsilon_, mean_in.data(),
                         var_in.data(), y);
      ApplyActivation(out[0]->floats);
      // The running statistics pass through unchanged.
      for (size_t o = 1; o < out.size(); ++o) {
        if (out[o] != nullptr) out[o]->floats = o % 2 == 1 ? mean_in : var_in;
      }
      return;
    }
    running_mean_ = mean_in;
    running_var_ = var_in;
    save_mean_.resize(channels_);
    save_invstd_.resize(channels_);
    cpu::BatchNormTrain(batch_, channels_, positions_, x, scale, bias, epsilon_, 1.0f - momentum_,
                        running_mean_.data(), running_var_.data(), y, save_mean_.data(),
                        save_invstd_.data());
    ApplyActivation(out[0]->floats);
    if (Present(out, 1)) out[1]->floats = running_mean_;
    if (Present(out, 2)) out[2]->floats = running_var_;
    if (Present(out, 3)) out[3]->floats = save_mean_;
    if (Present(out, 4)) BiasedVariance(x, out[4]->floats.data());
  }

  bool HasGradient(size_t i) const override { return i <= 2; }
  // B only for an activation's recomputed input.
  bool BackwardReadsInput(size_t i) const override { return i != 2 || Fused(); }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                const std::vector<const Value*>&, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    if (dout[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, in, *dout[0], din));
    const float* x = in[0]->floats.data();
    const float* dy = dout[0]->floats.data();
    const float* scale = in[1]->floats.data();
    std::vector<float> activation_dy;  // the activation's input gradient
    if (Fused()) {
      activation_dy.resize(in[0]->floats.size());
      ActivationGrad(x, dy, scale, in[2]->floats.data(), in[3]->floats.data(), in[4]->floats.data(),
                     activation_dy.data());
      dy = activation_dy.data();
    }
    auto target = [&](size_t i) { return din[i] != nullptr ? din[i]->floats.data() : nullptr; };
    if (!batch_stats_) {
      cpu::BatchNormEvalBackward(batch_, channels_, positions_, x, dy, scale, epsilon_,
                                 in[3]->floats.data(), in[4]->floats.data(), target(0), target(1),
                                 target(2));
      return;
    }
    // BatchNormBackward writes all three; unwanted ones go to scratch.
    std::vector<float> dx_scratch, dscale_scratch(channels_), dbias_scratch(channels_);
    float* dx = target(0);
    if (dx == nullptr) {
      dx_scratch.resize(in[0]->floats.size());
      dx = dx_scratch.data();
    }
    cpu::BatchNormBackward(batch_, channels_, positions_, x, dy, scale, save_mean_.data(),
                           save_invstd_.data(), dx,
                           target(1) != nullptr ? target(1) : dscale_scratch.data(),
                           target(2) != nullptr ? target(2) : dbias_scratch.data());
  }

  std::vector<std::pair<size_t, size_t>> StateUpdates() const override {
    if (!trains_) return {};
    return {{1, 3}, {2, 4}};
  }

  // On a device: a training node without the saved statistics' outputs
  // (inference nodes' gradient and saved_var are host-only so far).
  bool RunsOnDevice() const override { return trains_ && !saved_outputs_; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  void ForwardOnDevice(RunContext& ctx, const std::vector<const Value*>& in,
                       const std::vector<Value*>& out) {
    KernelBackend& d = *ctx.device;
    const cudaStream_t st = StreamOf(ctx);
    const float* x = DeviceData(ctx, *in[0]);
    const float* scale = DeviceData(ctx, *in[1]);
    const float* bias = DeviceData(ctx, *in[2]);
    const float* mean_in = DeviceData(ctx, *in[3]);
    const float* var_in = DeviceData(ctx, *in[4]);
    float* y = DeviceData(ctx, *out[0]);
    const size_t stats = static_cast<size_t>(channels_) * sizeof(float);
    if (!batch_stats_) {
      CheckLaunch(cuda::BatchNormEval(batch_, channels_, positions_, x, scale, bias, epsilon_,
                                      mean_in, var_in, y, activation_, st),
                  "BatchNormalization");
      for (size_t o = 1; o < 3 && o < out.size(); ++o) {
        if (out[o] != nullptr) d.Copy(stats, o == 1 ? mean_in : var_in, DeviceData(ctx, *out[o]));
      }
      return;
    }
    // The running statistics update in place: in the outputs, or in scratch.
    float* mean =
        Present(out, 1) ? DeviceData(ctx, *out[1]) : DeviceScratch(ctx, mean_dev_, channels_);
    float* var =
        Present(out, 2) ? DeviceData(ctx, *out[2]) : DeviceScratch(ctx, var_dev_, channels_);
    d.Copy(stats, mean_in, mean);
    d.Copy(stats, var_in, var);
    CheckLaunch(cuda::BatchNormTrain(
                    batch_, channels_, positions_, x, scale, bias, epsilon_, 1.0f - momentum_, mean,
                    var, y, DeviceScratch(ctx, save_mean_dev_, channels_),
                    DeviceScratch(ctx, save_invstd_dev_, channels_), activation_, st),
                "BatchNormalization");
  }

  void BackwardOnDevice(RunContext& ctx, const std::vector<const Value*>& in, const Value& dy,
                        const std::vector<Value*>& din) {
    ES_CHECK(batch_stats_) << "BatchNormalization: the running statistics' gradient is host-only";
    // BatchNormBackward writes all three; unwanted ones go to scratch.
    const auto target = [&](size_t i, DeviceMirror& scratch, size_t n) {
      return din[i] != nullptr ? DeviceData(ctx, *din[i]) : DeviceScratch(ctx, scratch, n);
    };
    CheckLaunch(cuda::BatchNormBackward(
                    batch_, channels_, positions_, DeviceData(ctx, *in[0]), DeviceData(ctx, dy),
                    DeviceData(ctx, *in[1]), Fused() ? DeviceData(ctx, *in[2]) : nullptr,
                    DeviceScratch(ctx, save_mean_dev_, channels_),
                    DeviceScratch(ctx, save_invstd_dev_, channels_),
                    target(0, dx_dev_, in[0]->size()), target(1, mean_dev_, channels_),
                    target(2, var_dev_, channels_), activation_, StreamOf(ctx)),
                "BatchNormalization gradient");
  }
#endif

  bool Fused() const { return activation_.kind != formulas::Activation::kNone; }

  // A fused activation, in place on the CPU.
  void ApplyActivation(std::vector<float>& y) const {
    if (!Fused()) return;
    for (float& v : y) v = activation_.Apply(v);
  }

  // The activation's input gradient from each output recomputed as the last
  // Forward computed it (the batch's statistics or the running ones).
  void ActivationGrad(const float* x, const float* dy, const float* gamma, const float* beta,
                      const float* running_mean, const float* running_var, float* out) const {
    for (int c = 0; c < channels_; ++c) {
      const float mean = batch_stats_ ? save_mean_[c] : running_mean[c];
      const float scale =
          gamma[c] * (batch_stats_ ? save_invstd_[c] : formulas::InvStd(running_var[c], epsilon_));
      for (int b = 0; b < batch_; ++b) {
        const size_t off = (static_cast<size_t>(b) * channels_ + c) * positions_;
        for (int p = 0; p < positions_; ++p) {
          const float y = formulas::BatchNormOutput(x[off + p], mean, scale, beta[c]);
          out[off + p] = activation_.Grad(y, dy[off + p]);
        }
      }
    }
  }

  static bool Present(const std::vector<Value*>& out, size_t o) {
    return o < out.size() && out[o] != nullptr;
  }

  // The biased batch variance, by the same channel sums BatchNormTrain runs.
  void BiasedVariance(const float* x, float* var) const {
    const float count = static_cast<float>(batch_) * static_cast<float>(positions_);
    for (int c = 0; c < channels_; ++c) {
      float total = 0.0f;
      for (int b = 0; b < batch_; ++b) {
        const float* row = x + (static_cast<size_t>(b) * channels_ + c) * positions_;
        float part = 0.0f;
        for (int p = 0; p < positions_; ++p)
          formulas::FoldSquaredDeviation(row[p], save_mean_[c], &part);
        total += part;
      }
      var[c] = total / count;
    }
  }

  Shape x_;
  size_t num_outputs_;
  bool trains_;
  bool saved_outputs_;  // outputs 3 and 4 (saved_mean, saved_var) are read
  float epsilon_, momentum_;
  formulas::Activation activation_;  // a BatchNormalization+Relu's or +Clip's
  int batch_ = 0, channels_ = 0, positions_ = 0;
  bool batch_stats_ = false;  // the last Forward's choice, for Backward
  std::vector<float> running_mean_, running_var_, save_mean_, save_invstd_;
  // On a device: running statistics not in outputs, the saved ones, scratch gradients.
  DeviceMirror mean_dev_, var_dev_, save_mean_dev_, save_invstd_dev_, dx_dev_;
};

}  // namespace

namespace {

StatusOr<std::unique_ptr<Op>> MakeBatchNormalizationOp(const Node& node, int64_t opset,
                                                       const std::vector<OpInput>& inputs,
                                                       formulas::Activation::Kind activation) {
  const bool mode_attribute = opset >= 14;
  const size_t max_outputs = mode_attribute ? 3 : 5;
  const bool clip = activation == formulas::Activation::kClip;
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 5, clip ? 7 : 5, max_outputs));
  formulas::Activation fused{activation};
  if (clip) {
    ES_ASSIGN_OR_RETURN(const ClipBounds bounds, ResolveClipBounds(node, opset, inputs, 5));
    if (!bounds.constant) return NodeError(node, "the fused Clip's bounds must be constants");
    fused.lo = bounds.lo;
    fused.hi = bounds.hi;
  }
  const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 0; i < 5; ++i)
    ES_RETURN_IF_ERROR(CheckDType(node, inputs, i, names[i], DType::kFloat32));
  const Shape& x = inputs[0].info->shape;
  if (x.size() < 2 || NumElements(x) == 0) {
    return NodeError(node, "input X must be at least 2-D (N, C, ...) and not empty");
  }
  for (size_t i = 1; i < 5; ++i) {
    if (inputs[i].info->shape != Shape{x[1]}) {
      return NodeError(node, absl::StrCat("input ", names[i], " must have shape [", x[1], "]"));
    }
  }
  ES_ASSIGN_OR_RETURN(const float epsilon, node.Get<float>("epsilon", 1e-5f));
  ES_ASSIGN_OR_RETURN(const float momentum, node.Get<float>("momentum", 0.9f));
  if (!(epsilon >= 0.0f)) return NodeError(node, "attribute epsilon must be >= 0");
  if (!(momentum >= 0.0f && momentum <= 1.0f)) {
    return NodeError(node, "attribute momentum must be in [0, 1]");
  }
  ES_ASSIGN_OR_RETURN(const int64_t spatial, node.Get<int64_t>("spatial", 1));
  if (spatial != 1) return NodeError(node, "attribute spatial = 0 is not supported");
  bool trains = false;
  for (size_t o = 1; o < node.outputs.size(); ++o) trains = trains || !node.outputs[o].empty();
  if (mode_attribute) {
    ES_ASSIGN_OR_RETURN(const int64_t training_mode, node.Get<int64_t>("training_mode", 0));
    if (training_mode != 0 && training_mode != 1) {
      return NodeError(node, "attribute training_mode must be 0 or 1");
    }
    if (training_mode == 0 && trains) {
      return NodeError(node, "outputs running_mean and running_var need training_mode = 1");
    }
    trains = training_mode == 1;
  } else if (node.attributes.count("training_mode") != 0) {
    return NodeError(node, absl::StrCat("attribute training_mode needs opset 14, not ", opset));
  }
  bool saved_outputs = false;
  for (size_t o = 3; o < node.outputs.size(); ++o)
    saved_outputs = saved_outputs || !node.outputs[o].empty();
  return std::unique_ptr<Op>(new BatchNormalization(x, trains ? max_outputs : 1, trains,
                                                    saved_outputs, epsilon, momentum, fused));
}

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeBatchNormalization(const Node& node, int64_t opset,
                                                     const std::vector<OpInput>& inputs) {
  return MakeBatchNormalizationOp(node, opset, inputs, formulas::Activation::kNone);
}

StatusOr<std::unique_ptr<Op>> MakeBatchNormalizationRelu(const Node& node, int64_t opset,
                                                         const std::vector<OpInput>& inputs) {
  return MakeBatchNormalizationOp(node, opset, inputs, formulas::Activation::kRelu);
}

StatusOr<std::unique_ptr<Op>> MakeBatchNormalizationClip(const Node& node, int64_t opset,
                                                         const std::vector<OpInput>& inputs) {
  return MakeBatchNormalizationOp(node, opset, inputs, formulas::Activation::kClip);
}

}  // namespace easyscale::graph
