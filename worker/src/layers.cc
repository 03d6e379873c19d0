#include "easyscale/worker/layers.h"

#include <cstring>
#include <stdexcept>

#include "easyscale/common/checks.h"
#include "easyscale/worker/cpu_kernels.h"
#include "easyscale/worker/fixed_point.h"

namespace easyscale {
namespace {

class CpuBackend : public KernelBackend {
 public:
  std::string Name() const override { return "cpu"; }
  void Wait() override {}
  void InjectFault() override { throw std::runtime_error("injected fault (test-only)"); }
  void Copy(size_t bytes, const void* src, void* dst) override {
    if (bytes > 0 && src != dst) std::memmove(dst, src, bytes);
  }
  void Zero(size_t bytes, void* dst) override {
    if (bytes > 0) std::memset(dst, 0, bytes);
  }
  void SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                           float* dlogits, float* loss) override {
    *loss = cpu::SoftmaxCrossEntropy(rows, classes, logits, labels, dlogits);
  }
  void AccumulateFixedPoint(std::span<const float* const> segments, std::span<const size_t> sizes,
                            int64_t max_terms, int64_t* acc, int32_t* nonfinite) override {
    for (size_t s = 0; s < segments.size(); ++s) {
      if (!easyscale::AccumulateFixedPoint(segments[s], sizes[s], max_terms, acc)) nonfinite[s] = 1;
      acc += sizes[s];
    }
  }
  void AddFixedPointSums(size_t n, const int64_t* src, int64_t* dst) override {
    for (size_t i = 0; i < n; ++i) dst[i] += src[i];
  }
  void Argmax(int rows, int classes, const float* logits, int32_t* out) override {
    cpu::Argmax(rows, classes, logits, out);
  }

 protected:
  void* AddressOf(void* host, size_t, DeviceMirror&) override { return host; }
  void CopyToDevice(const void*, size_t, DeviceMirror&) override {}
  void CopyToHost(void*, size_t, DeviceMirror&) override {}
};

// Conv2d, stride 1, no padding: out = W (OC x C*K*K) times im2col(x), plus bias.
class Conv2d : public Layer {
 public:
  Conv2d(int in, int out, int k) : in_(in), out_(out), k_(k) {
    weight_.name = "weight";
    weight_.state_dict_shape = {out, in, k, k};
    weight_.value = Tensor({out, in * k * k});
    weight_.grad = Tensor({out, in * k * k});
    weight_.fan_in = in * k * k;
    bias_.name = "bias";
    bias_.value = Tensor({out});
    bias_.grad = Tensor({out});
    bias_.fan_in = in * k * k;
    bias_.is_bias = true;
  }
  std::string Name() const override { return "conv2d"; }
  std::vector<int> OutputShape(const std::vector<int>& in) const override {
    ES_CHECK(in.size() == 4 && in[1] == in_ && in[2] >= k_ && in[3] >= k_) << "conv2d input";
    return {in[0], out_, in[2] - k_ + 1, in[3] - k_ + 1};
  }
  void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) override {
    B_ = x.dim(0), H_ = x.dim(2), W_ = x.dim(3);
    const int OH = H_ - k_ + 1, OW = W_ - k_ + 1, ckk = in_ * k_ * k_;
    const int cols = B_ * OH * OW;
    KernelBackend& k = ctx.k();
    cols_.Resize({ckk, cols});
    k.Im2Col(B_, in_, H_, W_, k_, k_, k.At(x), k.At(cols_));
    out_cm_.Resize({out_, cols});
    k.Gemm(out_, cols, ckk, k.At(weight_.value), ckk, k.At(cols_), cols, k.At(out_cm_), cols,
           false);
    y->Resize({B_, out_, OH, OW});
    k.ChannelMajorToNchw(B_, out_, OH * OW, k.At(out_cm_), k.At(bias_.value), k.At(*y));
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    const int OH = H_ - k_ + 1, OW = W_ - k_ + 1, ckk = in_ * k_ * k_;
    const int cols = B_ * OH * OW;
    KernelBackend& k = ctx.k();
    k.ChannelSum(B_, out_, OH * OW, k.At(dy), k.At(bias_.grad));
    dy_cm_.Resize({out_, cols});
    k.NchwToChannelMajor(B_, out_, OH * OW, k.At(dy), k.At(dy_cm_));
    // dW[o, r] = sum over columns (b, p) of dy[o, col] * cols[r, col], in the GEMM's k blocks.
    cols_t_.Resize({cols, ckk});
    k.Transpose(ckk, cols, k.At(cols_), k.At(cols_t_));
    k.Gemm(out_, ckk, cols, k.At(dy_cm_), cols, k.At(cols_t_), ckk, k.At(weight_.grad), ckk, false);
    if (dx == nullptr) return;
    // dcols[r, col] = sum over o ascending of W[o, r] * dy[o, col].
    w_t_.Resize({ckk, out_});
    k.Transpose(out_, ckk, k.At(weight_.value), k.At(w_t_));
    dcols_.Resize({ckk, cols});
    k.Gemm(ckk, cols, out_, k.At(w_t_), out_, k.At(dy_cm_), cols, k.At(dcols_), cols, false);
    dx->Resize({B_, in_, H_, W_});
    k.Col2Im(B_, in_, H_, W_, k_, k_, k.At(dcols_), k.At(*dx));
  }
  std::vector<Param*> Params() override { return {&weight_, &bias_}; }

 private:
  int in_, out_, k_;
  int B_ = 0, H_ = 0, W_ = 0;
  Param weight_, bias_;
  Tensor cols_, out_cm_, dy_cm_, cols_t_, w_t_, dcols_;
};

// y = x W^T + b, x: [B, in], W: [out, in].
class Linear : public Layer {
 public:
  Linear(int in, int out) : in_(in), out_(out) {
    weight_.name = "weight";
    weight_.value = Tensor({out, in});
    weight_.grad = Tensor({out, in});
    weight_.fan_in = in;
    bias_.name = "bias";
    bias_.value = Tensor({out});
    bias_.grad = Tensor({out});
    bias_.fan_in = in;
    bias_.is_bias = true;
  }
  std::string Name() const override { return "linear"; }
  std::vector<int> OutputShape(const std::vector<int>& in) const override {
    ES_CHECK(in.size() == 2 && in[1] == in_) << "linear input";
    return {in[0], out_};
  }
  void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) override {
    x_ = &x;
    const int B = x.dim(0);
    KernelBackend& k = ctx.k();
    w_t_.Resize({in_, out_});
    k.Transpose(out_, in_, k.At(weight_.value), k.At(w_t_));
    y->Resize({B, out_});
    k.Gemm(B, out_, in_, k.At(x), in_, k.At(w_t_), out_, k.At(*y), out_, false);
    k.AddRowBias(B, out_, k.At(bias_.value), k.At(*y));
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    const int B = dy.dim(0);
    KernelBackend& k = ctx.k();
    k.ColumnSum(B, out_, k.At(dy), k.At(bias_.grad));
    dy_t_.Resize({out_, B});
    k.Transpose(B, out_, k.At(dy), k.At(dy_t_));
    k.Gemm(out_, in_, B, k.At(dy_t_), B, k.At(*x_), in_, k.At(weight_.grad), in_, false);
    if (dx == nullptr) return;
    dx->Resize({B, in_});
    k.Gemm(B, in_, out_, k.At(dy), out_, k.At(weight_.value), in_, k.At(*dx), in_, false);
  }
  std::vector<Param*> Params() override { return {&weight_, &bias_}; }

 private:
  int in_, out_;
  const Tensor* x_ = nullptr;  // the input of the last Forward, alive until Backward
  Param weight_, bias_;
  Tensor w_t_, dy_t_;
};

class BatchNorm2d : public Layer {
 public:
  explicit BatchNorm2d(int c) : c_(c) {
    gamma_.name = "weight";  // PyTorch's names for gamma and beta
    gamma_.value = Tensor({c});
    gamma_.grad = Tensor({c});
    gamma_.fan_in = 0;
    gamma_.init_constant = 1.0f;
    beta_.name = "bias";
    beta_.value = Tensor({c});
    beta_.grad = Tensor({c});
    beta_.fan_in = 0;
    beta_.init_constant = 0.0f;
  }
  std::string Name() const override { return "batchnorm2d"; }
  std::vector<int> OutputShape(const std::vector<int>& in) const override {
    ES_CHECK(in.size() == 4 && in[1] == c_) << "batchnorm input";
    return in;
  }
  void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) override {
    x_ = &x;
    y->Resize(x.shape);
    const int B = x.dim(0), P = x.dim(2) * x.dim(3);
    Tensor& mean = (*ctx.buffers)[buffer_offset_];
    Tensor& var = (*ctx.buffers)[buffer_offset_ + 1];
    KernelBackend& k = ctx.k();
    if (ctx.training) {
      save_mean_.Resize({c_});
      save_invstd_.Resize({c_});
      k.BatchNormTrain(B, c_, P, k.At(x), k.At(gamma_.value), k.At(beta_.value), kEps, kMomentum,
                       k.At(mean), k.At(var), k.At(*y), k.At(save_mean_), k.At(save_invstd_));
    } else {
      k.BatchNormEval(B, c_, P, k.At(x), k.At(gamma_.value), k.At(beta_.value), kEps, k.At(mean),
                      k.At(var), k.At(*y));
    }
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    dx->Resize(dy.shape);
    const int B = dy.dim(0), P = dy.dim(2) * dy.dim(3);
    KernelBackend& k = ctx.k();
    k.BatchNormBackward(B, c_, P, k.At(*x_), k.At(dy), k.At(gamma_.value), k.At(save_mean_),
                        k.At(save_invstd_), k.At(*dx), k.At(gamma_.grad), k.At(beta_.grad));
  }
  std::vector<Param*> Params() override { return {&gamma_, &beta_}; }
  std::vector<Tensor> InitialBuffers() const override {
    Tensor mean({c_}), var({c_});
    std::fill(var.data.begin(), var.data.end(), 1.0f);
    return {mean, var};
  }
  std::vector<std::string> BufferNames() const override { return {"running_mean", "running_var"}; }

 private:
  static constexpr float kEps = 1e-5f;
  static constexpr float kMomentum = 0.1f;
  int c_;
  const Tensor* x_ = nullptr;
  Param gamma_, beta_;
  Tensor save_mean_, save_invstd_;
};

class Relu : public Layer {
 public:
  std::string Name() const override { return "relu"; }
  std::vector<int> OutputShape(const std::vector<int>& in) const override { return in; }
  void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) override {
    y->Resize(x.shape);
    ctx.k().Relu(x.size(), ctx.k().At(x), ctx.k().At(*y));
    y_ = y;
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    dx->Resize(dy.shape);
    KernelBackend& k = ctx.k();
    k.ReluBackward(dy.size(), k.At(*y_), k.At(dy), k.At(*dx));
  }

 private:
  const Tensor* y_ = nullptr;
};

class Pool2 : public Layer {
 public:
  explicit Pool2(bool max) : max_(max) {}
  std::string Name() const override { return max_ ? "maxpool2" : "avgpool2"; }
  std::vector<int> OutputShape(const std::vector<int>& in) const override {
    ES_CHECK(in.size() == 4 && in[2] % 2 == 0 && in[3] % 2 == 0) << "pool input";
    return {in[0], in[1], in[2] / 2, in[3] / 2};
  }
  void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) override {
    in_shape_ = x.shape;
    y->Resize(OutputShape(x.shape));
    KernelBackend& k = ctx.k();
    if (max_) {
      argmax_.Resize(y->shape);
      k.MaxPool2(x.dim(0), x.dim(1), x.dim(2), x.dim(3), k.At(x), k.At(*y), k.At(argmax_));
    } else {
      k.AvgPool2(x.dim(0), x.dim(1), x.dim(2), x.dim(3), k.At(x), k.At(*y));
    }
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    dx->Resize(in_shape_);
    const auto& s = in_shape_;
    KernelBackend& k = ctx.k();
    if (max_) {
      k.MaxPool2Backward(s[0], s[1], s[2], s[3], k.At(dy), k.At(argmax_), k.At(*dx));
    } else {
      k.AvgPool2Backward(s[0], s[1], s[2], s[3], k.At(dy), k.At(*dx));
    }
  }

 private:
  bool max_;
  std::vector<int> in_shape_;
  IndexTensor argmax_;
};

class Dropout : public Layer {
 public:
  explicit Dropout(float p) : p_(p) {}
  std::string Name() const override { return "dropout"; }
  std::vector<int> OutputShape(const std::vector<int>& in) const override { return in; }
  void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) override {
    y->Resize(x.shape);
    KernelBackend& k = ctx.k();
    if (!ctx.training) {
      k.Copy(x.bytes(), k.At(x), k.At(*y));
      return;
    }
    mask_.Resize(x.shape);
    k.Dropout(x.size(), p_, ctx.dropout_key.k0, ctx.dropout_key.k1, *ctx.dropout_counter, k.At(x),
              k.At(*y), k.At(mask_));
    *ctx.dropout_counter += (x.size() + 3) / 4;
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    dx->Resize(dy.shape);
    KernelBackend& k = ctx.k();
    k.Mul(dy.size(), k.At(dy), k.At(mask_), k.At(*dx));
  }

 private:
  float p_;
  Tensor mask_;
};

class Flatten : public Layer {
 public:
  std::string Name() const override { return "flatten"; }
  std::vector<int> OutputShape(const std::vector<int>& in) const override {
    return {in[0], static_cast<int>(Tensor::NumElements(in) / static_cast<size_t>(in[0]))};
  }
  void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) override {
    in_shape_ = x.shape;
    y->Resize(OutputShape(x.shape));
    ctx.k().Copy(x.bytes(), ctx.k().At(x), ctx.k().At(*y));
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    dx->Resize(in_shape_);
    ctx.k().Copy(dy.bytes(), ctx.k().At(dy), ctx.k().At(*dx));
  }

 private:
  std::vector<int> in_shape_;
};

}  // namespace

KernelBackend& CpuKernelBackend() {
  static CpuBackend backend;
  return backend;
}

std::unique_ptr<Layer> MakeConv2d(int in, int out, int k) {
  return std::make_unique<Conv2d>(in, out, k);
}
std::unique_ptr<Layer> MakeLinear(int in, int out) { return std::make_unique<Linear>(in, out); }
std::unique_ptr<Layer> MakeBatchNorm2d(int c) { return std::make_unique<BatchNorm2d>(c); }
std::unique_ptr<Layer> MakeRelu() { return std::make_unique<Relu>(); }
std::unique_ptr<Layer> MakeMaxPool2() { return std::make_unique<Pool2>(true); }
std::unique_ptr<Layer> MakeAvgPool2() { return std::make_unique<Pool2>(false); }
std::unique_ptr<Layer> MakeDropout(float p) { return std::make_unique<Dropout>(p); }
std::unique_ptr<Layer> MakeFlatten() { return std::make_unique<Flatten>(); }

}  // namespace easyscale
