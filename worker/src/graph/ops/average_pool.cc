// AveragePool: 1-D or 2-D NC[H]W average pooling with strides, pads (or
// auto_pad), dilations, ceil_mode and count_include_pad.
//
// Operation order: y = s / n, s the sum from 0 of the window's in-image taps in
// (ky, kx) order, n the number of those taps (count_include_pad = 0) or of the
// taps inside the padded input (count_include_pad = 1; taps a ceil_mode window
// puts past the end padding are never counted).
// Backward: dx = 0, then for every output (n, c, oy, ox) in row-major order and
// each of its in-image taps in (ky, kx) order, dx[tap] += dy / n.
#include <utility>
#include <vector>

#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#include "graph/ops/pool_formulas.h"
#include "graph/ops/window.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

class AveragePool final : public Op {
 public:
  AveragePool(const Window& w, bool count_include_pad) : w_(w) {
    // n per output position, the same on every plane.
    divisor_.resize(w_.oh * w_.ow);
    for (int64_t oy = 0; oy < w_.oh; ++oy) {
      for (int64_t ox = 0; ox < w_.ow; ++ox) {
        int64_t n = 0;
        for (int64_t ky = 0; ky < w_.kh; ++ky) {
          const int64_t iy = oy * w_.sh - w_.pad_top + ky * w_.dh;
          for (int64_t kx = 0; kx < w_.kw; ++kx) {
            const int64_t ix = ox * w_.sw - w_.pad_left + kx * w_.dw;
            const bool counted = count_include_pad
                                     ? iy < w_.h + w_.pad_bottom && ix < w_.w + w_.pad_right
                                     : iy >= 0 && iy < w_.h && ix >= 0 && ix < w_.w;
            n += counted ? 1 : 0;
          }
        }
        divisor_[oy * w_.ow + ox] = static_cast<float>(n);
      }
    }
  }

  std::vector<ValueInfo> OutputInfos() const override {
    return {{DType::kFloat32, w_.OutputShape(w_.channels)}};
  }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(
        ctx, CheckLaunch(cuda_ops::AveragePoolForward(Planes(), w_.Geometry(w_.channels),
                                                      DeviceDivisor(ctx), DeviceData(ctx, *in[0]),
                                                      DeviceData(ctx, *out[0]), StreamOf(ctx)),
                         "AveragePool"));
    const float* x = in[0]->floats.data();
    float* y = out[0]->floats.data();
    const cpu::ConvGeometry g = w_.Geometry(w_.channels);
    const int64_t planes = w_.batch * w_.channels, image = w_.h * w_.w;
    size_t o = 0;
    for (int64_t pl = 0; pl < planes; ++pl) {
      const float* img = x + pl * image;
      for (int64_t op = 0; op < w_.oh * w_.ow; ++op, ++o) {
        const int oy = static_cast<int>(op / w_.ow), ox = static_cast<int>(op % w_.ow);
        y[o] = AveragePoolSum(g, img, oy, ox) / divisor_[op];
      }
    }
  }

  bool HasGradient(size_t i) const override { return i == 0; }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (dout[0] == nullptr || din[0] == nullptr) return;
    ES_RUN_ON_DEVICE(
        ctx, CheckLaunch(cuda_ops::AveragePoolBackward(
                             Planes(), w_.Geometry(w_.channels), DeviceDivisor(ctx),
                             DeviceData(ctx, *dout[0]), DeviceData(ctx, *din[0]), StreamOf(ctx)),
                         "AveragePool gradient"));
    const float* dy = dout[0]->floats.data();
    float* dx = din[0]->floats.data();
    const int64_t planes = w_.batch * w_.channels, image = w_.h * w_.w;
    std::fill(dx, dx + din[0]->floats.size(), 0.0f);
    size_t o = 0;
    for (int64_t pl = 0; pl < planes; ++pl) {
      float* img = dx + pl * image;
      for (int64_t op = 0; op < w_.oh * w_.ow; ++op, ++o) {
        const int64_t oy = op / w_.ow, ox = op % w_.ow;
        const float g = dy[o] / divisor_[op];
        for (int64_t ky = 0; ky < w_.kh; ++ky) {
          const int64_t iy = oy * w_.sh - w_.pad_top + ky * w_.dh;
          if (iy < 0 || iy >= w_.h) continue;
          for (int64_t kx = 0; kx < w_.kw; ++kx) {
            const int64_t ix = ox * w_.sw - w_.pad_left + kx * w_.dw;
            if (ix >= 0 && ix < w_.w) img[iy * w_.w + ix] += g;
          }
        }
      }
    }
  }

  bool RunsOnDevice() const override { return true; }

 private:
  int Planes() const { return static_cast<int>(w_.batch * w_.channels); }
#ifdef EASYSCALE_WITH_CUDA
  // The divisors in the pass's device memory, uploaded on first use.
  const float* DeviceDivisor(RunContext& ctx) {
    const size_t bytes = divisor_.size() * sizeof(float);
    if (divisor_dev_.bytes() != bytes)
      ctx.device->UploadBytes(divisor_.data(), bytes, divisor_dev_);
    return static_cast<const float*>(divisor_dev_.get());
  }
#endif

  Window w_;
  std::vector<float> divisor_;  // by output position (oy, ox)
  DeviceMirror divisor_dev_;
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeAveragePool(const Node& node, int64_t,
                                              const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 1, 1, 1));
  ES_ASSIGN_OR_RETURN(Window w, ResolvePoolWindow(node, inputs));
  ES_ASSIGN_OR_RETURN(const int64_t count_include_pad, node.Get<int64_t>("count_include_pad", 0));
  if (count_include_pad != 0 && count_include_pad != 1) {
    return NodeError(node, "attribute count_include_pad must be 0 or 1");
  }
  return std::unique_ptr<Op>(new AveragePool(w, count_include_pad != 0));
}

}  // namespace easyscale::graph
