// File: worker/src/graph/ops/binary_elementwise.h
//
// The element-wise binary ops (Add, Sub, Mul, Div, Pow) as one op over a
// formula: numpy broadcasting (broadcast.h), float32, and for the formulas
// that have one an int64 forward (shape arithmetic the loader folds; no
// gradient). The output has a's dtype. Each op's formula is a struct in
// elementwise_formulas.h; its file has the factory:
//
//   struct AddFormula {
//     static constexpr bool kInt64 = true;   // two int64 inputs allowed
//     static constexpr bool kMixed = false;  // float32 with int64 b, int64 with float32 b
//     static constexpr bool kGradB = true;   // b is differentiable
//     static constexpr int kGradIsDy = kDyA | kDyB;  // operands whose term is dy
//     static float Apply(float a, float b);  // (an int64 b converted to float)
//     static int64_t ApplyInt(int64_t a, int64_t b);      // where kInt64
//     static int64_t ApplyIntFloat(int64_t a, float b);   // where kMixed
//     static float GradA(float a, float b, float y, float dy);
//     static float GradB(float a, float b, float y, float dy);  // where kGradB
//   };
//
// Forward has no reductions. Backward reduces each operand's terms to its
// shape in broadcast.h's order: per operand element, ascending output index,
// in BinaryReductionBlock's blocks (a bias over long rows).
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "graph/ops/broadcast.h"
#include "graph/ops/elementwise_formulas.h"
#include "graph/ops/node_checks.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {

template <typename F>
class BinaryElementwiseOp final : public Op {
 public:
  BinaryElementwiseOp(Broadcast bc, DType dtype, DType b_dtype)
      : bc_(std::move(bc)),
        dtype_(dtype),
        b_dtype_(b_dtype),
        block_{BinaryReductionBlock(bc_, 0), BinaryReductionBlock(bc_, 1)} {}

  std::vector<ValueInfo> OutputInfos() const override { return {{dtype_, bc_.out}}; }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, *in[0], *in[1], *out[0]));
    const Value& a = *in[0];
    const Value& b = *in[1];
    Value& y = *out[0];
    if (dtype_ == DType::kInt64) {
      if constexpr (F::kMixed) {
        if (b.dtype == DType::kFloat32) {
          ForEachBroadcast(bc_, [&](int64_t o, int64_t ia, int64_t ib) {
            y.ints[o] = F::ApplyIntFloat(a.ints[ia], b.floats[ib]);
          });
          return;
        }
      }
      if constexpr (F::kInt64) {
        ForEachBroadcast(bc_, [&](int64_t o, int64_t ia, int64_t ib) {
          y.ints[o] = F::ApplyInt(a.ints[ia], b.ints[ib]);
        });
      }
      return;
    }
    const std::vector<float>& bf = FloatB(b);
    ForEachBroadcast(bc_, [&](int64_t o, int64_t ia, int64_t ib) {
      y.floats[o] = F::Apply(a.floats[ia], bf[ib]);
    });
  }

  bool HasGradient(size_t i) const override {
    return dtype_ == DType::kFloat32 && (i == 0 || (i == 1 && F::kGradB));
  }
  // dY itself for an operand whose term is dy and that is not broadcast.
  std::optional<size_t> GradientOfOutput(size_t i) const override {
    const int operand = i == 0 ? kDyA : kDyB;
    if ((F::kGradIsDy & operand) == 0 || !HasGradient(i) || !NotBroadcast(bc_, static_cast<int>(i)))
      return std::nullopt;
    return 0;
  }

  void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                const std::vector<const Value*>& out, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, in, *out[0], dout[0], din));
    const float* a = in[0]->floats.data();
    const float* b = FloatB(*in[1]).data();
    const float* y = out[0]->floats.data();
    for (int k = 0; k < 2; ++k) {
      if (din[k] == nullptr) continue;
      std::vector<float>& grad = din[k]->floats;
      if (dout[0] == nullptr) {
        std::fill(grad.begin(), grad.end(), 0.0f);
        continue;
      }
      const float* dy = dout[0]->floats.data();
      if (k == 1 && !F::kGradB) continue;
      ReduceToOperand(
          bc_, k,
          [&](int64_t o, int64_t ia, int64_t ib) {
            return BinaryGradTerm<F>(k, a, b, y, dy, ia, ib, o);
          },
          grad, block_[k]);
    }
  }

  bool BackwardReadsInput(size_t i) const override {
    return (reads_ & (i == 0 ? kReadsA : kReadsB)) != 0;
  }
  bool BackwardReadsOutput(size_t) const override { return (reads_ & kReadsY) != 0; }
  void SetWantedGradients(const std::vector<bool>& wanted) override {
    reads_ = (wanted.at(0) ? F::kGradAReads : 0) | (wanted.at(1) ? F::kGradBReads : 0);
  }

  // Float32 operands only (the int64 forms are shape arithmetic the loader folds).
  bool RunsOnDevice() const override {
    return dtype_ == DType::kFloat32 && b_dtype_ == DType::kFloat32 &&
           bc_.out.size() <= kMaxDeviceRank;
  }

 private:
#ifdef EASYSCALE_WITH_CUDA
  void ForwardOnDevice(RunContext& ctx, const Value& a, const Value& b, Value& y) {
    CheckLaunch(cuda_ops::BinaryForward<F>(DeviceDims(bc_), y.size(), DeviceData(ctx, a),
                                           DeviceData(ctx, b), DeviceData(ctx, y), StreamOf(ctx)),
                "element-wise op");
  }
  void BackwardOnDevice(RunContext& ctx, const std::vector<const Value*>& in, const Value& y,
                        const Value* dy, const std::vector<Value*>& din) {
    if (dy == nullptr) return;  // the gradients are zeroed
    for (int k = 0; k < 2; ++k) {
      if (din[k] == nullptr || (k == 1 && !F::kGradB)) continue;
      const int reads = k == 0 ? F::kGradAReads : F::kGradBReads;
      CheckLaunch(cuda_ops::BinaryBackward<F>(
                      DeviceDims(bc_), k, din[k]->size(),
                      (reads & kReadsA) != 0 ? DeviceData(ctx, *in[0]) : nullptr,
                      (reads & kReadsB) != 0 ? DeviceData(ctx, *in[1]) : nullptr,
                      (reads & kReadsY) != 0 ? DeviceData(ctx, y) : nullptr, DeviceData(ctx, *dy),
                      DeviceData(ctx, *din[k]), block_[k], StreamOf(ctx)),
                  "element-wise op gradient");
    }
  }
#endif

  // b's elements as floats: its own, or an int64 exponent's converted.
  const std::vector<float>& FloatB(const Value& b) {
    if (b.dtype == DType::kFloat32) return b.floats;
    b_floats_.assign(b.ints.begin(), b.ints.end());
    return b_floats_;
  }

  Broadcast bc_;
  DType dtype_, b_dtype_;
  int64_t block_[2];  // each operand's gradient reduction blocks (BinaryReductionBlock)
  std::vector<float> b_floats_;
  // What Backward reads: both rules' needs until SetWantedGradients narrows it.
  int reads_ = F::kGradAReads | F::kGradBReads;
};

// Two inputs A and B of the dtypes F allows, broadcastable; one output.
template <typename F>
StatusOr<std::unique_ptr<Op>> MakeBinaryElementwise(const Node& node,
                                                    const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 2, 2, 1));
  const DType ta = inputs[0].info->dtype, tb = inputs[1].info->dtype;
  const bool ok = (ta == DType::kFloat32 && tb == DType::kFloat32) ||
                  (F::kInt64 && ta == DType::kInt64 && tb == DType::kInt64) ||
                  (F::kMixed && ((ta == DType::kFloat32 && tb == DType::kInt64) ||
                                 (ta == DType::kInt64 && tb == DType::kFloat32)));
  if (!ok) {
    return NodeError(node, absl::StrCat("inputs ", node.inputs[0], " and ", node.inputs[1], " are ",
                                        ToString(ta), " and ", ToString(tb),
                                        F::kMixed   ? ": supported are float32 and int64"
                                        : F::kInt64 ? ": supported are two float32 or two int64"
                                                    : ": supported are two float32"));
  }
  ES_ASSIGN_OR_RETURN(Broadcast bc,
                      MakeBroadcast(node, inputs[0].info->shape, inputs[1].info->shape));
  return std::unique_ptr<Op>(new BinaryElementwiseOp<F>(std::move(bc), ta, tb));
}

}  // namespace easyscale::graph
