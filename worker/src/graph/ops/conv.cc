// Conv: 1-D or 2-D NC[H]W convolution with groups (depthwise included),
// strides, pads (or auto_pad), dilations and an optional bias.
//
// Operation order (cols: cpu::Im2ColImage's unfolding of one sample's group,
// row kc = (c, ky, kx), 0 for taps in the padding; GemmOutput: cpu::Gemm's
// k order, kernel_formulas.h):
//   Y[b, m, p]  = GemmOutput over kc ascending of W[m, kc] * cols[kc, p],
//                 from B[m] (from 0 without a bias). The depthwise loop
//                 (group == C == M) runs the same fma chain, padding taps included,
//                 and its dX (and a 3x3 one's dW) the same products and sums
//                 without the columns.
//   dW[m, kc]   = GemmOutput over k = (b, p) flattened (K = N*OH*OW) of
//                 cols_b[kc, p] * dY[b, m, p], from 0: one product over the
//                 batch, in k blocks of formulas::WeightGradientKBlock for
//                 an output of [M/group, kc] (depthwise: [C, KH*KW]).
//   dcols[kc, p] = GemmOutput over m (the group's) of W[m, kc] * dY[b, m, p];
//   dX          = cpu::Col2ImImage of dcols: per element, taps in (ky, kx) order
//                 (a 1x1, stride-1, unpadded kernel's dcols are dX itself).
//   dB[m]       = cpu::ChannelSum of dY (per sample a chain over p, then samples).
#include <algorithm>
#include <utility>
#include <vector>

#include "easyscale/worker/cpu_kernels.h"
#include "easyscale/worker/detmath.h"
#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#include "graph/ops/window.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

class Conv final : public Op {
 public:
  Conv(const Window& w, int64_t out_channels, int64_t group, bool has_bias)
      : has_bias_(has_bias),
        batch_(static_cast<int>(w.batch)),
        group_(static_cast<int>(group)),
        mg_(static_cast<int>(out_channels / group)),
        out_shape_(w.OutputShape(out_channels)) {
    geo_ = w.Geometry(w.channels / group);
    kc_ = geo_.C * geo_.KH * geo_.KW;
    p_ = geo_.OH * geo_.OW;
    direct_ = cpu::IsPointwise(geo_);
    depthwise_ = geo_.C == 1 && mg_ == 1 && !direct_;
    hp_ = (geo_.OH - 1) * geo_.SH + (geo_.KH - 1) * geo_.DH + 1;
    wp_ = (geo_.OW - 1) * geo_.SW + (geo_.KW - 1) * geo_.DW + 1;
    // A depthwise dW's outputs are every channel's taps; else a group's filters.
    dw_block_ = formulas::WeightGradientKBlock(batch_, p_, depthwise_ ? group_ : mg_,
                                               depthwise_ ? geo_.KH * geo_.KW : kc_);
  }

  std::vector<ValueInfo> OutputInfos() const override { return {{DType::kFloat32, out_shape_}}; }

  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, in, out));
    const float* x = in[0]->floats.data();
    const float* w = in[1]->floats.data();
    const float* bias = has_bias_ ? in[2]->floats.data() : nullptr;
    float* y = out[0]->floats.data();
    const int nb = SamplesPerChunk();
    const size_t ld = static_cast<size_t>(nb) * p_;
    if (!depthwise_) cols_.resize(static_cast<size_t>(kc_) * ld);
    if (nb > 1) out_cm_.resize(static_cast<size_t>(mg_) * ld);
    for (int g = 0; g < group_; ++g) {
      const float* wg = w + static_cast<size_t>(g) * mg_ * kc_;
      for (int b0 = 0; b0 < batch_; b0 += nb) {
        const int samples = std::min(nb, batch_ - b0);
        if (depthwise_) {
          for (int b = b0; b < b0 + samples; ++b) {
            DepthwiseForward(Slice(x, b, g, geo_.C, geo_.H * geo_.W), wg,
                             bias != nullptr ? bias[g] : 0.0f, Slice(y, b, g, mg_, p_));
          }
          continue;
        }
        // The chunk's columns side by side; one sample writes Y in place.
        const float* cols = Columns(x, b0, samples, g, ld);
        float* yc = nb > 1 ? out_cm_.data() : Slice(y, b0, g, mg_, p_);
        for (int m = 0; m < mg_; ++m) {
          std::fill(yc + m * ld, yc + m * ld + samples * p_,
                    bias != nullptr ? bias[g * mg_ + m] : 0.0f);
        }
        cpu::Gemm(mg_, samples * p_, kc_, wg, kc_, cols, static_cast<int>(ld), yc,
                  static_cast<int>(ld), /*accumulate=*/true);
        if (nb == 1) continue;
        for (int s = 0; s < samples; ++s) {
          for (int m = 0; m < mg_; ++m) {
            std::copy_n(yc + m * ld + s * p_, p_, Slice(y, b0 + s, g, mg_, p_) + m * p_);
          }
        }
      }
    }
  }

  bool HasGradient(size_t i) const override { return i <= 2; }
  bool BackwardReadsInput(size_t i) const override { return i <= 1; }
  bool BackwardReadsOutput(size_t) const override { return false; }

  void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                const std::vector<const Value*>&, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    if (dout[0] == nullptr) return;  // din already zero
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, in, dout, din));
    const float* x = in[0]->floats.data();
    const float* w = in[1]->floats.data();
    const float* dy = dout[0]->floats.data();
    if (has_bias_ && din.size() > 2 && din[2] != nullptr) {
      cpu::ChannelSum(batch_, mg_ * group_, p_, dy, din[2]->floats.data());
    }
    const bool want_dx = din[0] != nullptr, want_dw = din[1] != nullptr;
    if (!want_dx && !want_dw) return;
    const int nb = SamplesPerChunk();
    const size_t ld = static_cast<size_t>(nb) * p_;
    cols_.resize(static_cast<size_t>(kc_) * ld);
    // The scratch stays from pass to pass: every element read is written first.
    if (want_dw) {
      dyt_.resize(ld * mg_);
      dwt_.resize(static_cast<size_t>(kc_) * mg_);
      part_.resize(dwt_.size());
    }
    if (want_dx) {
      wt_.resize(static_cast<size_t>(kc_) * mg_);
      if (nb > 1) dy_cm_.resize(static_cast<size_t>(mg_) * ld);
    }
    for (int g = 0; g < group_; ++g) {
      const float* wg = w + static_cast<size_t>(g) * mg_ * kc_;
      if (want_dx && !depthwise_) cpu::Transpose(mg_, kc_, wg, wt_.data());
      const bool dw_direct = want_dw && depthwise_ && geo_.KH == 3 && geo_.KW == 3;
      if (dw_direct) {
        DepthwiseWeightGrad<3, 3>(x, dy, g, din[1]->floats.data() + static_cast<size_t>(g) * kc_);
      }
      int64_t k = 0;  // dW's k: the flattened (b, p) index
      for (int b0 = 0; b0 < batch_; b0 += nb) {
        const int samples = std::min(nb, batch_ - b0);
        const int width = samples * p_;
        if (want_dw && !dw_direct) {
          const float* cols = Columns(x, b0, samples, g, ld);
          for (int s = 0; s < samples; ++s) {
            cpu::Transpose(mg_, p_, Slice(dy, b0 + s, g, mg_, p_),
                           dyt_.data() + static_cast<size_t>(s) * p_ * mg_);
          }
          // GemmOutput over the flattened k in dw_block_ blocks, each chained
          // from 0 and added in block order, fed a chunk's segment at a time.
          for (int q = 0; q < width;) {
            const int64_t block = k / dw_block_;
            const int64_t block_end = (block + 1) * dw_block_;
            const int n = static_cast<int>(std::min<int64_t>(width - q, block_end - k));
            const bool starts = k % dw_block_ == 0;
            float* target = block == 0 ? dwt_.data() : part_.data();
            cpu::Gemm(kc_, mg_, n, cols + q, static_cast<int>(ld),
                      dyt_.data() + static_cast<size_t>(q) * mg_, mg_, target, mg_,
                      /*accumulate=*/!starts);
            k += n;
            q += n;
            const bool ends = k == block_end || k == static_cast<int64_t>(batch_) * p_;
            if (block > 0 && ends) {
              for (size_t e = 0; e < dwt_.size(); ++e) dwt_[e] += part_[e];
            }
          }
        }
        if (want_dx && depthwise_) {
          for (int b = b0; b < b0 + samples; ++b) {
            DepthwiseInputGrad(Slice(dy, b, g, mg_, p_), wg,
                               Slice(din[0]->floats.data(), b, g, geo_.C, geo_.H * geo_.W));
          }
        } else if (want_dx) {
          // dcols for the chunk (over cols_, done with), then back per sample.
          const float* dyc = Slice(dy, b0, g, mg_, p_);
          if (nb > 1) {
            for (int s = 0; s < samples; ++s) {
              for (int m = 0; m < mg_; ++m) {
                std::copy_n(Slice(dy, b0 + s, g, mg_, p_) + m * p_, p_,
                            dy_cm_.data() + m * ld + s * p_);
              }
            }
            dyc = dy_cm_.data();
          }
          if (direct_ && nb == 1) {
            // The product straight into dX, each chain then added to +0 as
            // Col2Im's sum over taps adds it (a chain can end at -0: an fma
            // whose exact result underflows below zero rounds to -0).
            float* dx = Slice(din[0]->floats.data(), b0, g, geo_.C, geo_.H * geo_.W);
            cpu::Gemm(kc_, width, mg_, wt_.data(), mg_, dyc, static_cast<int>(ld), dx,
                      static_cast<int>(ld), false);
            for (int c = 0; c < kc_; ++c) {
              float* row = dx + static_cast<size_t>(c) * ld;
              for (int e = 0; e < width; ++e) row[e] = 0.0f + row[e];
            }
          } else {
            cpu::Gemm(kc_, width, mg_, wt_.data(), mg_, dyc, static_cast<int>(ld), cols_.data(),
                      static_cast<int>(ld), false);
            for (int s = 0; s < samples; ++s) {
              cpu::Col2ImImage(geo_, cols_.data() + static_cast<size_t>(s) * p_, ld,
                               Slice(din[0]->floats.data(), b0 + s, g, geo_.C, geo_.H * geo_.W));
            }
          }
        }
      }
      if (want_dw && !dw_direct) {
        cpu::Transpose(kc_, mg_, dwt_.data(),
                       din[1]->floats.data() + static_cast<size_t>(g) * mg_ * kc_);
      }
    }
  }

  // On the device, a depthwise convolution runs one thread per output (or
  // per tap's chain of a k block) and every other one its three products as
  // implicit GEMMs (the 1x1 shortcut above gives the same bits), with the
  // pass's transient scratch: slot 0 the tap table, 1 channel-major rows of Y
  // or dY, 2 W^T per tap (or the columns of dX's fallback), 3 W^T (the
  // forward product's A, k-major; dX's fallback).
  bool RunsOnDevice() const override { return true; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  const int2* TapTable(RunContext& ctx) {
    auto* table = reinterpret_cast<int2*>(TransientScratch(ctx, 0, 2 * static_cast<size_t>(kc_)));
    CheckLaunch(cuda_ops::ConvTapTable(geo_, table, StreamOf(ctx)), "Conv tap table");
    return table;
  }

  void ForwardOnDevice(RunContext& ctx, const std::vector<const Value*>& in,
                       const std::vector<Value*>& out) {
    const cudaStream_t st = StreamOf(ctx);
    const float* x = DeviceData(ctx, *in[0]);
    const float* w = DeviceData(ctx, *in[1]);
    const float* bias = has_bias_ ? DeviceData(ctx, *in[2]) : nullptr;
    float* y = DeviceData(ctx, *out[0]);
    if (depthwise_) {
      CheckLaunch(cuda_ops::DepthwiseForward(batch_, group_, geo_, x, w, bias, y, st),
                  "Conv depthwise");
      return;
    }
    const int2* table = direct_ ? nullptr : TapTable(ctx);
    float* wt = TransientScratch(ctx, 3, static_cast<size_t>(kc_) * mg_);
    float* cm = kc_ > formulas::kGemmKBlock
                    ? TransientScratch(ctx, 1, static_cast<size_t>(mg_) * batch_ * p_)
                    : nullptr;
    for (int g = 0; g < group_; ++g) {
      CheckLaunch(cuda_ops::ConvForward(batch_, group_, g, mg_, geo_, table, x,
                                        w + static_cast<size_t>(g) * mg_ * kc_,
                                        bias != nullptr ? bias + g * mg_ : nullptr, wt, cm, y, st),
                  "Conv");
    }
  }

  void BackwardOnDevice(RunContext& ctx, const std::vector<const Value*>& in,
                        const std::vector<const Value*>& dout, const std::vector<Value*>& din) {
    const cudaStream_t st = StreamOf(ctx);
    const float* x = DeviceData(ctx, *in[0]);
    const float* w = DeviceData(ctx, *in[1]);
    const float* dy = DeviceData(ctx, *dout[0]);
    if (has_bias_ && din.size() > 2 && din[2] != nullptr) {
      CheckLaunch(cuda::ChannelSum(batch_, mg_ * group_, p_, dy, DeviceData(ctx, *din[2]), st),
                  "Conv bias gradient");
    }
    // The weight's gradient and the input's are independent, and deep
    // layers' few output positions leave the GPU part idle for either alone:
    // the weight's runs on the lane's side stream, its tap table (slot 0)
    // filled on the pass's stream before the fork.
    const int2* table = din[1] != nullptr && !depthwise_ ? TapTable(ctx) : nullptr;
    WeightBesideInput(
        ctx, din[1] != nullptr, din[0] != nullptr,
        [&](cudaStream_t weight_stream) {
          float* dw = DeviceData(ctx, *din[1]);
          if (depthwise_) {
            CheckLaunch(cuda_ops::DepthwiseWeightGrad(batch_, group_, geo_, dw_block_, x, dy, dw,
                                                      weight_stream),
                        "Conv depthwise weight gradient");
            return;
          }
          for (int g = 0; g < group_; ++g) {
            CheckLaunch(
                cuda_ops::ConvWeightGrad(batch_, group_, g, mg_, geo_, dw_block_, table, x, dy,
                                         dw + static_cast<size_t>(g) * mg_ * kc_, weight_stream),
                "Conv weight gradient");
          }
        },
        [&] { InputGradientOnDevice(ctx, w, dy, DeviceData(ctx, *din[0])); });
  }

  // dX on the pass's stream.
  void InputGradientOnDevice(RunContext& ctx, const float* w, const float* dy, float* dx) {
    const cudaStream_t st = StreamOf(ctx);
    if (depthwise_) {
      CheckLaunch(cuda_ops::DepthwiseInputGrad(batch_, group_, geo_, w, dy, dx, st),
                  "Conv depthwise input gradient");
      return;
    }
    if (mg_ <= formulas::kGemmKBlock) {
      float* wt = direct_ ? nullptr : TransientScratch(ctx, 2, static_cast<size_t>(kc_) * mg_);
      for (int g = 0; g < group_; ++g) {
        CheckLaunch(cuda_ops::ConvInputGrad(batch_, group_, g, mg_, geo_,
                                            w + static_cast<size_t>(g) * mg_ * kc_, dy, wt, dx, st),
                    "Conv input gradient");
      }
      return;
    }
    // A chain over m too long for one k block: dcols [kc, (b, p)] = W^T [kc,
    // mg] x dY [mg, (b, p)] in memory, folded back.
    const int width = batch_ * p_;
    float* dycm = TransientScratch(ctx, 1, static_cast<size_t>(mg_) * width);
    float* cols = TransientScratch(ctx, 2, static_cast<size_t>(kc_) * width);
    float* wt = TransientScratch(ctx, 3, static_cast<size_t>(kc_) * mg_);
    for (int g = 0; g < group_; ++g) {
      CheckLaunch(cuda_ops::GroupLayout(batch_, mg_ * group_, g, mg_, p_, false, dy, dycm, st),
                  "Conv layout");
      CheckLaunch(cuda::Transpose(mg_, kc_, w + static_cast<size_t>(g) * mg_ * kc_, wt, st),
                  "Conv transpose");
      CheckLaunch(cuda::Gemm(kc_, width, mg_, wt, mg_, dycm, width, cols, width, false, st),
                  "Conv input GEMM");
      CheckLaunch(cuda_ops::ConvFoldColumns(batch_, group_, g, geo_, cols, dx, st), "Conv fold");
    }
  }
#endif

  // Sample b's group g of an NCHW tensor with `channels` per group of `size`.
  template <typename T>
  T* Slice(T* base, int b, int g, int channels, int size) const {
    return base + ((static_cast<size_t>(b) * group_ + g) * channels) * size;
  }

  // Enough samples per chunk that the GEMMs get a few hundred columns.
  int SamplesPerChunk() const {
    constexpr int kColumns = 256;
    return std::clamp((kColumns + p_ - 1) / p_, 1, batch_);
  }

  // The columns of samples [b0, b0 + samples), group g, side by side with rows
  // ld apart: the input itself for one sample of a 1x1 kernel.
  const float* Columns(const float* x, int b0, int samples, int g, size_t ld) {
    const int size = geo_.H * geo_.W;
    if (direct_ && samples == 1 && ld == static_cast<size_t>(p_)) {
      return Slice(x, b0, g, geo_.C, size);
    }
    for (int s = 0; s < samples; ++s) {
      const float* img = Slice(x, b0 + s, g, geo_.C, size);
      float* dst = cols_.data() + static_cast<size_t>(s) * p_;
      if (!direct_) {
        cpu::Im2ColImage(geo_, img, dst, ld);
        continue;
      }
      for (int c = 0; c < geo_.C; ++c) {  // whole channel planes
        std::copy_n(img + static_cast<size_t>(c) * size, size, dst + c * ld);
      }
    }
    return cols_.data();
  }

  // One channel, one filter: for each tap (ky, kx), every output position's
  // chain takes fma(w, x or 0, acc) from `from` (the bias or 0), as the GEMM
  // over the columns would.
  void DepthwiseForward(const float* x, const float* w, float from, float* y) {
    if (geo_.SH == 1 && geo_.SW == 1) return DepthwiseForwardUnitStride(x, w, from, y);
    std::fill(y, y + p_, from);
    for (int ky = 0; ky < geo_.KH; ++ky) {
      for (int kx = 0; kx < geo_.KW; ++kx) {
        const float wk = w[ky * geo_.KW + kx];
        const int x0 = kx * geo_.DW - geo_.PL;
        const auto [lo, hi] = cpu::InsideColumns(geo_, x0);
        for (int oy = 0; oy < geo_.OH; ++oy) {
          float* __restrict row = y + static_cast<size_t>(oy) * geo_.OW;
          const int iy = oy * geo_.SH - geo_.PT + ky * geo_.DH;
          // Padding taps still take fma(w, 0, acc); the runs split only so the
          // inside run vectorises.
          const bool inside_y = iy >= 0 && iy < geo_.H;
          const int a = inside_y ? lo : geo_.OW, b = inside_y ? hi : geo_.OW;
          for (int ox = 0; ox < a; ++ox) row[ox] = detmath::Fma(wk, 0.0f, row[ox]);
          const float* __restrict src = x + static_cast<size_t>(inside_y ? iy : 0) * geo_.W;
          if (geo_.SW == 1) {
            for (int ox = a; ox < b; ++ox) row[ox] = detmath::Fma(wk, src[ox + x0], row[ox]);
          } else {
            for (int ox = a; ox < b; ++ox)
              row[ox] = detmath::Fma(wk, src[ox * geo_.SW + x0], row[ox]);
          }
          for (int ox = b; ox < geo_.OW; ++ox) row[ox] = detmath::Fma(wk, 0.0f, row[ox]);
        }
      }
    }
  }

  // Stride 1 over the padded image: output (oy, ox) at oy * wp_ + ox, so each
  // tap is one contiguous run (the columns past OW are scratch, dropped).
  void DepthwiseForwardUnitStride(const float* x, const float* w, float from, float* y) {
    const float* img = Padded(x);
    const size_t n = static_cast<size_t>(geo_.OH) * wp_;
    wide_.assign(n, from);
    float* __restrict out = wide_.data();
    for (int ky = 0; ky < geo_.KH; ++ky) {
      for (int kx = 0; kx < geo_.KW; ++kx) {
        const float wk = w[ky * geo_.KW + kx];
        const float* __restrict src = img + static_cast<size_t>(ky) * geo_.DH * wp_ + kx * geo_.DW;
        for (size_t i = 0; i < n; ++i) out[i] = detmath::Fma(wk, src[i], out[i]);
      }
    }
    for (int oy = 0; oy < geo_.OH; ++oy) {
      std::copy_n(out + oy * wp_, geo_.OW, y + static_cast<size_t>(oy) * geo_.OW);
    }
  }

  // The GEMM-and-Col2Im route without the columns: dx from 0 takes, tap by
  // tap in (ky, kx) order, the product dcols = fma(w, dy, 0) of each output
  // that reads it (one per tap).
  void DepthwiseInputGrad(const float* dy, const float* w, float* dx) const {
    std::fill(dx, dx + static_cast<size_t>(geo_.H) * geo_.W, 0.0f);
    for (int ky = 0; ky < geo_.KH; ++ky) {
      for (int kx = 0; kx < geo_.KW; ++kx) {
        const float wk = w[ky * geo_.KW + kx];
        const int x0 = kx * geo_.DW - geo_.PL;
        const auto [lo, hi] = cpu::InsideColumns(geo_, x0);
        for (int oy = 0; oy < geo_.OH; ++oy) {
          const int iy = oy * geo_.SH - geo_.PT + ky * geo_.DH;
          if (iy < 0 || iy >= geo_.H) continue;
          const float* __restrict src = dy + static_cast<size_t>(oy) * geo_.OW;
          float* __restrict dst = dx + static_cast<size_t>(iy) * geo_.W;
          if (geo_.SW == 1) {
            for (int ox = lo; ox < hi; ++ox) dst[ox + x0] += detmath::Fma(wk, src[ox], 0.0f);
          } else {
            for (int ox = lo; ox < hi; ++ox) {
              dst[ox * geo_.SW + x0] += detmath::Fma(wk, src[ox], 0.0f);
            }
          }
        }
      }
    }
  }

  // A KH x KW depthwise filter's dW for group g without the columns: per
  // tap, the GEMM's chain fma(cols, dy, acc) over k = (b, p) in dw_block_
  // blocks (padding taps read 0); the taps' chains run side by side.
  template <int KH, int KW>
  void DepthwiseWeightGrad(const float* x, const float* dy, int g, float* dw) {
    constexpr int kTaps = KH * KW;
    const int64_t total_k = static_cast<int64_t>(batch_) * p_;
    float acc[kTaps] = {}, part[kTaps];
    int64_t k = 0;
    for (int b = 0; b < batch_; ++b) {
      const float* img = Padded(Slice(x, b, g, 1, geo_.H * geo_.W));
      const float* d = Slice(dy, b, g, 1, p_);
      for (int oy = 0; oy < geo_.OH; ++oy) {
        const float* top = img + static_cast<size_t>(oy) * geo_.SH * wp_;
        for (int ox = 0; ox < geo_.OW; ++ox, ++k) {
          const bool first_block = k < dw_block_;
          if (!first_block && k % dw_block_ == 0) std::fill_n(part, kTaps, 0.0f);
          float* chains = first_block ? acc : part;
          const float dv = d[oy * geo_.OW + ox];
          const float* corner = top + ox * geo_.SW;
#pragma GCC unroll 16
          for (int ky = 0; ky < KH; ++ky) {
#pragma GCC unroll 16
            for (int kx = 0; kx < KW; ++kx) {
              const float v = corner[ky * geo_.DH * wp_ + kx * geo_.DW];
              chains[ky * KW + kx] = detmath::Fma(v, dv, chains[ky * KW + kx]);
            }
          }
          const int64_t next = k + 1;
          if (!first_block && (next % dw_block_ == 0 || next == total_k)) {
            for (int t = 0; t < kTaps; ++t) acc[t] += part[t];
          }
        }
      }
    }
    std::copy_n(acc, kTaps, dw);
  }

  // One channel's image in pad_ with its padding as zeros: row r, column c
  // is x[r - PT, c - PL] (0 outside), hp_ x wp_ covering every tap, plus a
  // zero row of slack for the stride-1 forward's run past the last column.
  const float* Padded(const float* x) {
    // Only the interior is ever written, so the zero borders outlive a call.
    if (pad_.empty()) pad_.assign(static_cast<size_t>(hp_ + 1) * wp_, 0.0f);
    const int rows = std::min(geo_.H, hp_ - geo_.PT);
    const int cols = std::min(geo_.W, wp_ - geo_.PL);
    for (int r = 0; r < rows; ++r) {
      std::copy_n(x + static_cast<size_t>(r) * geo_.W, cols,
                  pad_.data() + static_cast<size_t>(r + geo_.PT) * wp_ + geo_.PL);
    }
    return pad_.data();
  }

  bool has_bias_;
  int batch_, group_, mg_, kc_ = 0, p_ = 0;
  int dw_block_ = formulas::kGemmKBlock;  // dW's k block (WeightGradientKBlock)
  cpu::ConvGeometry geo_;
  bool direct_ = false, depthwise_ = false;
  Shape out_shape_;
  int hp_ = 0, wp_ = 0;               // the padded image the depthwise taps read
  std::vector<float> cols_, out_cm_;  // scratch: a chunk's columns, its channel-major Y
  // The backward pass's scratch: dY transposed, dW^T and a later k block's part
  // of it, W^T, a chunk's channel-major dY.
  std::vector<float> dyt_, dwt_, part_, wt_, dy_cm_;
  std::vector<float> pad_, wide_;  // scratch: a padded image, a stride-1 depthwise Y
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeConv(const Node& node, int64_t,
                                       const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckArity(node, inputs, 2, 3, 1));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "X", DType::kFloat32));
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 1, "W", DType::kFloat32));
  const Shape& x = inputs[0].info->shape;
  const Shape& w = inputs[1].info->shape;
  if (x.size() != 3 && x.size() != 4) {
    return NodeError(
        node, absl::StrCat("input X must be 3-D or 4-D (N, C, [H,] W), not rank ", x.size()));
  }
  if (w.size() != x.size()) {
    return NodeError(node,
                     absl::StrCat("input W must have X's rank ", x.size(), ", not ", w.size()));
  }
  ES_ASSIGN_OR_RETURN(const int64_t group, node.Get<int64_t>("group", 1));
  if (group < 1) return NodeError(node, "attribute group must be >= 1");
  if (x[1] != w[1] * group) {
    return NodeError(node, absl::StrCat("input X has ", x[1], " channels; W and group ", group,
                                        " want ", w[1] * group));
  }
  if (w[0] < 1 || w[0] % group != 0) {
    return NodeError(node, absl::StrCat("input W's ", w[0],
                                        " filters are not a positive multiple of group ", group));
  }
  const std::vector<int64_t> kernel(w.begin() + 2, w.end());
  ES_ASSIGN_OR_RETURN(std::vector<int64_t> kernel_shape,
                      node.Get<std::vector<int64_t>>("kernel_shape", kernel));
  if (kernel_shape != kernel) {
    return NodeError(node, "attribute kernel_shape disagrees with input W's shape");
  }
  ES_ASSIGN_OR_RETURN(Window win, ResolveWindow(node, x, kernel, /*pooling=*/false));
  const bool has_bias = inputs.size() > 2 && inputs[2].info != nullptr;
  if (has_bias) {
    ES_RETURN_IF_ERROR(CheckDType(node, inputs, 2, "B", DType::kFloat32));
    if (inputs[2].info->shape != Shape{w[0]}) {
      return NodeError(node, absl::StrCat("input B must have shape [", w[0], "]"));
    }
  }
  return std::unique_ptr<Op>(new Conv(win, w[0], group, has_bias));
}

}  // namespace easyscale::graph
