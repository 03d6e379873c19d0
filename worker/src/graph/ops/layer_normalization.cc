// LayerNormalization (ONNX, opset 17), float32: each row (the elements at
// dimensions axis.. of X, axis default -1) is normalized with its own mean
// and variance, then scaled by Scale and shifted by B (optional; absent: 1
// and 0). Outputs Y, and optionally Mean and InvStdDev (X's shape with the
// normalized dimensions 1).
//
// Order, per row of n elements, ascending index:
//   mean = (sum of x_j from +0) / n;
//   var = (fma(d_j, d_j, .) over d_j = x_j - mean, from +0) / n;
//   invstd = 1 / sqrt(var + epsilon); xhat_j = (x_j - mean) * invstd;
//   y_j = xhat_j * scale_j + b_j.
// Backward (kernel_formulas.h's BatchNorm rules over a row): g_j = dy_j * scale_j;
//   sum_g and sum_gx = fma(g_j, xhat_j, .) from +0, ascending j;
//   dx_j = BatchNormInputGrad(x_j, g_j, mean, invstd, invstd / n, n, sum_g, sum_gx).
//   dScale_j = sum over rows of dy_j * xhat_j, dB_j = sum over rows of dy_j,
//   each from +0 in ascending row order; where X's first dimension splits
//   the rows into formulas::ColumnSumBlockRows's blocks of whole samples,
//   that sum over each block, the blocks' sums added in order.
// Only Y carries a gradient: gradients arriving at Mean and InvStdDev are not
// propagated (exported models read only Y).
#include <algorithm>
#include <cmath>
#include <utility>

#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#include "graph/ops/row_formulas.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

class LayerNormalizationOp final : public Op {
 public:
  LayerNormalizationOp(Shape shape, size_t axis, float epsilon)
      : shape_(std::move(shape)), epsilon_(epsilon) {
    stats_shape_ = shape_;
    for (size_t d = axis; d < shape_.size(); ++d) {
      n_ *= shape_[d];
      stats_shape_[d] = 1;
    }
    rows_ = NumElements(stats_shape_);
    block_rows_ = axis > 0 ? formulas::ColumnSumBlockRows(shape_[0], rows_, n_) : 0;
  }

  std::vector<ValueInfo> OutputInfos() const override {
    return {{DType::kFloat32, shape_},
            {DType::kFloat32, stats_shape_},
            {DType::kFloat32, stats_shape_}};
  }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, in, out));
    const float* x = in[0]->floats.data();
    const float* scale = Optional(in, 1);
    const float* bias = Optional(in, 2);
    float* y = out[0]->floats.data();
    mean_.resize(rows_);
    invstd_.resize(rows_);
    for (int64_t r = 0; r < rows_; ++r) {
      const float* xr = x + r * n_;
      LayerNormRowStats(xr, n_, epsilon_, &mean_[r], &invstd_[r]);
      for (int64_t j = 0; j < n_; ++j) {
        y[r * n_ + j] = LayerNormOutput(xr[j], mean_[r], invstd_[r], scale, bias, j);
      }
    }
    if (out.size() > 1 && out[1] != nullptr) out[1]->floats = mean_;
    if (out.size() > 2 && out[2] != nullptr) out[2]->floats = invstd_;
  }

  bool OutputOptional(size_t o) const override { return o >= 1; }
  bool HasGradient(size_t i) const override { return i <= 2; }
  bool BackwardReadsInput(size_t i) const override { return i <= 1; }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                const std::vector<const Value*>&, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, in, dout[0], din));
    for (Value* d : din) {
      if (d != nullptr) std::fill(d->floats.begin(), d->floats.end(), 0.0f);
    }
    if (dout[0] == nullptr) return;
    const float* x = in[0]->floats.data();
    const float* scale = Optional(in, 1);
    const float* dy = dout[0]->floats.data();
    float* dx = din[0] != nullptr ? din[0]->floats.data() : nullptr;
    float* dscale = din.size() > 1 && din[1] != nullptr ? din[1]->floats.data() : nullptr;
    float* dbias = din.size() > 2 && din[2] != nullptr ? din[2]->floats.data() : nullptr;
    const float count = static_cast<float>(n_);
    std::vector<float> g(n_), part_scale, part_bias;
    if (block_rows_ > 0) {
      part_scale.resize(n_);
      part_bias.resize(n_);
    }
    for (int64_t r = 0; r < rows_; ++r) {
      const float* xr = x + r * n_;
      const float* dyr = dy + r * n_;
      const float mean = mean_[r], invstd = invstd_[r];
      // Block 0 sums into the gradients, later blocks into parts added at their end.
      const bool first_block = block_rows_ == 0 || r < block_rows_;
      if (!first_block && r % block_rows_ == 0) {
        std::fill(part_scale.begin(), part_scale.end(), 0.0f);
        std::fill(part_bias.begin(), part_bias.end(), 0.0f);
      }
      float* ds = dscale == nullptr ? nullptr : first_block ? dscale : part_scale.data();
      float* db = dbias == nullptr ? nullptr : first_block ? dbias : part_bias.data();
      for (int64_t j = 0; j < n_; ++j) {
        if (ds != nullptr) ds[j] += dyr[j] * ((xr[j] - mean) * invstd);
        if (db != nullptr) db[j] += dyr[j];
      }
      if (!first_block && (r + 1) % block_rows_ == 0) {
        for (int64_t j = 0; j < n_; ++j) {
          if (ds != nullptr) dscale[j] = dscale[j] + ds[j];
          if (db != nullptr) dbias[j] = dbias[j] + db[j];
        }
      }
      if (dx == nullptr) continue;
      float sum_g = 0.0f, sum_gx = 0.0f;
      for (int64_t j = 0; j < n_; ++j) {
        g[j] = dyr[j] * (scale ? scale[j] : 1.0f);
        formulas::FoldBatchNormGrads(xr[j], g[j], mean, invstd, &sum_g, &sum_gx);
      }
      const float k = invstd / count;
      for (int64_t j = 0; j < n_; ++j) {
        dx[r * n_ + j] =
            formulas::BatchNormInputGrad(xr[j], g[j], mean, invstd, k, count, sum_g, sum_gx);
      }
    }
  }

  bool RunsOnDevice() const override { return true; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  // The row statistics stay in mean_dev_ and invstd_dev_ for Backward.
  void ForwardOnDevice(RunContext& ctx, const std::vector<const Value*>& in,
                       const std::vector<Value*>& out) {
    const size_t rows = static_cast<size_t>(rows_);
    float* mean = DeviceScratch(ctx, mean_dev_, rows);
    float* invstd = DeviceScratch(ctx, invstd_dev_, rows);
    CheckLaunch(
        cuda_ops::LayerNormForward(rows, static_cast<size_t>(n_), epsilon_, DeviceData(ctx, *in[0]),
                                   DeviceOptional(ctx, in, 1), DeviceOptional(ctx, in, 2),
                                   DeviceData(ctx, *out[0]), mean, invstd, StreamOf(ctx)),
        "LayerNormalization");
    if (out.size() > 1 && out[1] != nullptr) {
      ctx.device->Copy(rows * sizeof(float), mean, DeviceData(ctx, *out[1]));
    }
    if (out.size() > 2 && out[2] != nullptr) {
      ctx.device->Copy(rows * sizeof(float), invstd, DeviceData(ctx, *out[2]));
    }
  }
  void BackwardOnDevice(RunContext& ctx, const std::vector<const Value*>& in, const Value* dy,
                        const std::vector<Value*>& din) {
    if (dy == nullptr) return;  // the gradients are zeroed
    const auto grad = [&](size_t i) {
      return din.size() > i && din[i] != nullptr ? DeviceData(ctx, *din[i]) : nullptr;
    };
    const size_t rows = static_cast<size_t>(rows_);
    CheckLaunch(cuda_ops::LayerNormBackward(rows, static_cast<size_t>(n_), DeviceData(ctx, *in[0]),
                                            DeviceOptional(ctx, in, 1), DeviceData(ctx, *dy),
                                            DeviceScratch(ctx, mean_dev_, rows),
                                            DeviceScratch(ctx, invstd_dev_, rows), block_rows_,
                                            DeviceScratch(ctx, row_sums_dev_, 2 * rows), grad(0),
                                            grad(1), grad(2), StreamOf(ctx)),
                "LayerNormalization gradient");
  }
  static const float* DeviceOptional(RunContext& ctx, const std::vector<const Value*>& in,
                                     size_t i) {
    return in.size() > i && in[i] != nullptr ? DeviceData(ctx, *in[i]) : nullptr;
  }
#endif

  static const float* Optional(const std::vector<const Value*>& in, size_t i) {
    return in.size() > i && in[i] != nullptr ? in[i]->floats.data() : nullptr;
  }

  Shape shape_, stats_shape_;
  float epsilon_;
  int64_t n_ = 1, rows_ = 1;
  int64_t block_rows_ = 0;            // dScale's and dB's blocks of rows (0: one chain)
  std::vector<float> mean_, invstd_;  // Forward's, per row, for Backward
  DeviceMirror mean_dev_, invstd_dev_, row_sums_dev_;  // the same on a device; dx's row sums
};

// `s` without its leading 1s.
Shape StripLeadingOnes(Shape s) {
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), [](int64_t d) { return d != 1; }));
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeLayerNormalization(const Node& node, int64_t,
                                                     const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 1, 3, 3));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "X", DType::kFloat32));
  const Shape& shape = inputs[0].info->shape;
  if (shape.empty()) return NodeError(node, "input X is a scalar");
  ES_ASSIGN_OR_RETURN(const int64_t axis_attr, node.Get<int64_t>("axis", -1));
  ES_ASSIGN_OR_RETURN(const size_t axis,
                      NormalizeAxis(node, "attribute axis", axis_attr, shape.size()));
  ES_ASSIGN_OR_RETURN(const float epsilon, node.Get<float>("epsilon", 1e-5f));
  if (!(epsilon >= 0.0f)) return NodeError(node, "attribute epsilon is negative or NaN");
  ES_ASSIGN_OR_RETURN(const int64_t stash_type, node.Get<int64_t>("stash_type", 1));
  if (stash_type != 1) {
    return NodeError(node, absl::StrCat("attribute stash_type ", stash_type,
                                        " is not supported (statistics are float32: 1)"));
  }
  // Scale and B as PyTorch exports them: the normalized shape (leading 1s aside).
  const Shape normalized = StripLeadingOnes(Shape(shape.begin() + axis, shape.end()));
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].info == nullptr) continue;
    ES_RETURN_IF_ERROR(CheckDType(node, inputs, i, i == 1 ? "Scale" : "B", DType::kFloat32));
    if (StripLeadingOnes(inputs[i].info->shape) != normalized) {
      return NodeError(node, absl::StrCat("input ", i == 1 ? "Scale" : "B", " (", node.inputs[i],
                                          ") is not of the normalized shape of X"));
    }
  }
  return std::unique_ptr<Op>(new LayerNormalizationOp(shape, axis, epsilon));
}

}  // namespace easyscale::graph
