// MaxPool: 1-D or 2-D NC[H]W max pooling with strides, pads (or auto_pad),
// dilations and ceil_mode. The Indices output is not supported.
//
// Operation order: each window's taps in (ky, kx) order, taps in the padding
// skipped; the first tap's value, then a later tap replaces it only when
// strictly greater (>), so the first maximum in scan order wins and is the
// argmax. A window with no tap in the image gives -inf and no gradient.
// Backward: dx = 0, then for every output (n, c, oy, ox) in row-major order,
// dx[its argmax] += dy (windows that overlap add in that order).
#include <limits>
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

class MaxPool final : public Op {
 public:
  explicit MaxPool(const Window& w) : w_(w) {}

  std::vector<ValueInfo> OutputInfos() const override {
    return {{DType::kFloat32, w_.OutputShape(w_.channels)}};
  }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(
        ctx, CheckLaunch(cuda_ops::MaxPoolForward(Planes(), w_.Geometry(w_.channels),
                                                  DeviceData(ctx, *in[0]), DeviceData(ctx, *out[0]),
                                                  DeviceArgmax(ctx, out[0]->size()), StreamOf(ctx)),
                         "MaxPool"));
    const float* x = in[0]->floats.data();
    float* y = out[0]->floats.data();
    const cpu::ConvGeometry g = w_.Geometry(w_.channels);
    const int64_t planes = w_.batch * w_.channels, image = w_.h * w_.w;
    argmax_.resize(out[0]->floats.size());
    size_t o = 0;
    for (int64_t pl = 0; pl < planes; ++pl) {
      const float* img = x + pl * image;
      for (int oy = 0; oy < g.OH; ++oy) {
        for (int ox = 0; ox < g.OW; ++ox, ++o) {
          const int best = MaxPoolArgmax(g, img, oy, ox);
          argmax_[o] = best;
          y[o] = best >= 0 ? img[best] : -std::numeric_limits<float>::infinity();
        }
      }
    }
  }

  bool HasGradient(size_t i) const override { return i == 0; }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (dout[0] == nullptr || din[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx,
                     CheckLaunch(cuda_ops::MaxPoolBackward(Planes(), w_.Geometry(w_.channels),
                                                           DeviceData(ctx, *dout[0]),
                                                           DeviceArgmax(ctx, dout[0]->size()),
                                                           DeviceData(ctx, *din[0]), StreamOf(ctx)),
                                 "MaxPool gradient"));
    const float* dy = dout[0]->floats.data();
    float* dx = din[0]->floats.data();
    const int64_t image = w_.h * w_.w, per_plane = w_.oh * w_.ow;
    std::fill(dx, dx + din[0]->floats.size(), 0.0f);
    for (size_t o = 0; o < argmax_.size(); ++o) {
      if (argmax_[o] >= 0) dx[static_cast<int64_t>(o) / per_plane * image + argmax_[o]] += dy[o];
    }
  }

  bool RunsOnDevice() const override { return true; }

 private:
  int Planes() const { return static_cast<int>(w_.batch * w_.channels); }
#ifdef EASYSCALE_WITH_CUDA
  int32_t* DeviceArgmax(RunContext& ctx, size_t n) {
    return static_cast<int32_t*>(ctx.device->Address(nullptr, n * sizeof(int32_t), argmax_dev_));
  }
#endif

  Window w_;
  std::vector<int64_t> argmax_;  // by output: the winning tap's index in its image, or -1
  DeviceMirror argmax_dev_;      // the same on a device, as int32
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeMaxPool(const Node& node, int64_t,
                                          const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 1, 1, 2));
  if (node.outputs.size() > 1 && !node.outputs[1].empty()) {
    return NodeError(node, "output Indices is not supported");
  }
  ES_ASSIGN_OR_RETURN(Window w, ResolvePoolWindow(node, inputs));
  return std::unique_ptr<Op>(new MaxPool(w));
}

}  // namespace easyscale::graph
