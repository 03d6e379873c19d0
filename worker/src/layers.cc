#include "easyscale/worker/layers.h"

#include "easyscale/common/checks.h"
#include "easyscale/worker/cpu_kernels.h"

namespace easyscale {
namespace {

// Conv2d, stride 1, no padding: out = W (OC x C*K*K) times im2col(x), plus bias.
class Conv2d : public Layer {
 public:
  Conv2d(int in, int out, int k) : in_(in), out_(out), k_(k) {
    weight_.name = "weight";
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
  void Forward(const Tensor& x, Tensor* y, LayerContext&) override {
    B_ = x.dim(0), H_ = x.dim(2), W_ = x.dim(3);
    const int OH = H_ - k_ + 1, OW = W_ - k_ + 1, ckk = in_ * k_ * k_;
    const int cols = B_ * OH * OW;
    cols_.Resize({ckk, cols});
    cpu::Im2Col(B_, in_, H_, W_, k_, k_, x.ptr(), cols_.ptr());
    out_cm_.Resize({out_, cols});
    cpu::Gemm(out_, cols, ckk, weight_.value.ptr(), ckk, cols_.ptr(), cols, out_cm_.ptr(), cols,
              false);
    y->Resize({B_, out_, OH, OW});
    cpu::ChannelMajorToNchw(B_, out_, OH * OW, out_cm_.ptr(), bias_.value.ptr(), y->ptr());
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext&) override {
    const int OH = H_ - k_ + 1, OW = W_ - k_ + 1, ckk = in_ * k_ * k_;
    const int cols = B_ * OH * OW;
    cpu::ChannelSum(B_, out_, OH * OW, dy.ptr(), bias_.grad.ptr());
    dy_cm_.Resize({out_, cols});
    cpu::NchwToChannelMajor(B_, out_, OH * OW, dy.ptr(), dy_cm_.ptr());
    // dW[o, r] = sum over columns (b, p) ascending of dy[o, col] * cols[r, col].
    cols_t_.Resize({cols, ckk});
    cpu::Transpose(ckk, cols, cols_.ptr(), cols_t_.ptr());
    cpu::Gemm(out_, ckk, cols, dy_cm_.ptr(), cols, cols_t_.ptr(), ckk, weight_.grad.ptr(), ckk,
              false);
    if (dx == nullptr) return;
    // dcols[r, col] = sum over o ascending of W[o, r] * dy[o, col].
    w_t_.Resize({ckk, out_});
    cpu::Transpose(out_, ckk, weight_.value.ptr(), w_t_.ptr());
    dcols_.Resize({ckk, cols});
    cpu::Gemm(ckk, cols, out_, w_t_.ptr(), out_, dy_cm_.ptr(), cols, dcols_.ptr(), cols, false);
    dx->Resize({B_, in_, H_, W_});
    cpu::Col2Im(B_, in_, H_, W_, k_, k_, dcols_.ptr(), dx->ptr());
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
  void Forward(const Tensor& x, Tensor* y, LayerContext&) override {
    x_ = &x;
    const int B = x.dim(0);
    w_t_.Resize({in_, out_});
    cpu::Transpose(out_, in_, weight_.value.ptr(), w_t_.ptr());
    y->Resize({B, out_});
    cpu::Gemm(B, out_, in_, x.ptr(), in_, w_t_.ptr(), out_, y->ptr(), out_, false);
    cpu::AddRowBias(B, out_, bias_.value.ptr(), y->ptr());
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext&) override {
    const int B = dy.dim(0);
    cpu::ColumnSum(B, out_, dy.ptr(), bias_.grad.ptr());
    dy_t_.Resize({out_, B});
    cpu::Transpose(B, out_, dy.ptr(), dy_t_.ptr());
    cpu::Gemm(out_, in_, B, dy_t_.ptr(), B, x_->ptr(), in_, weight_.grad.ptr(), in_, false);
    if (dx == nullptr) return;
    dx->Resize({B, in_});
    cpu::Gemm(B, in_, out_, dy.ptr(), out_, weight_.value.ptr(), in_, dx->ptr(), in_, false);
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
    gamma_.name = "gamma";
    gamma_.value = Tensor({c});
    gamma_.grad = Tensor({c});
    gamma_.fan_in = 0;
    gamma_.init_constant = 1.0f;
    beta_.name = "beta";
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
    if (ctx.training) {
      save_mean_.Resize({c_});
      save_invstd_.Resize({c_});
      cpu::BatchNormTrain(B, c_, P, x.ptr(), gamma_.value.ptr(), beta_.value.ptr(), kEps, kMomentum,
                          mean.ptr(), var.ptr(), y->ptr(), save_mean_.ptr(), save_invstd_.ptr());
    } else {
      cpu::BatchNormEval(B, c_, P, x.ptr(), gamma_.value.ptr(), beta_.value.ptr(), kEps, mean.ptr(),
                         var.ptr(), y->ptr());
    }
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext&) override {
    dx->Resize(dy.shape);
    const int B = dy.dim(0), P = dy.dim(2) * dy.dim(3);
    cpu::BatchNormBackward(B, c_, P, x_->ptr(), dy.ptr(), gamma_.value.ptr(), save_mean_.ptr(),
                           save_invstd_.ptr(), dx->ptr(), gamma_.grad.ptr(), beta_.grad.ptr());
  }
  std::vector<Param*> Params() override { return {&gamma_, &beta_}; }
  std::vector<Tensor> InitialBuffers() const override {
    Tensor mean({c_}), var({c_});
    std::fill(var.data.begin(), var.data.end(), 1.0f);
    return {mean, var};
  }

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
  void Forward(const Tensor& x, Tensor* y, LayerContext&) override {
    y->Resize(x.shape);
    cpu::Relu(x.size(), x.ptr(), y->ptr());
    y_ = y;
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext&) override {
    dx->Resize(dy.shape);
    cpu::ReluBackward(dy.size(), y_->ptr(), dy.ptr(), dx->ptr());
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
  void Forward(const Tensor& x, Tensor* y, LayerContext&) override {
    in_shape_ = x.shape;
    y->Resize(OutputShape(x.shape));
    if (max_) {
      argmax_.resize(y->size());
      cpu::MaxPool2(x.dim(0), x.dim(1), x.dim(2), x.dim(3), x.ptr(), y->ptr(), argmax_.data());
    } else {
      cpu::AvgPool2(x.dim(0), x.dim(1), x.dim(2), x.dim(3), x.ptr(), y->ptr());
    }
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext&) override {
    dx->Resize(in_shape_);
    const auto& s = in_shape_;
    if (max_) {
      cpu::MaxPool2Backward(s[0], s[1], s[2], s[3], dy.ptr(), argmax_.data(), dx->ptr());
    } else {
      cpu::AvgPool2Backward(s[0], s[1], s[2], s[3], dy.ptr(), dx->ptr());
    }
  }

 private:
  bool max_;
  std::vector<int> in_shape_;
  std::vector<int32_t> argmax_;
};

class Dropout : public Layer {
 public:
  explicit Dropout(float p) : p_(p) {}
  std::string Name() const override { return "dropout"; }
  std::vector<int> OutputShape(const std::vector<int>& in) const override { return in; }
  void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) override {
    y->Resize(x.shape);
    if (!ctx.training) {
      y->data = x.data;
      return;
    }
    mask_.Resize(x.shape);
    cpu::Dropout(x.size(), p_, ctx.dropout_key.k0, ctx.dropout_key.k1, *ctx.dropout_counter,
                 x.ptr(), y->ptr(), mask_.ptr());
    *ctx.dropout_counter += (x.size() + 3) / 4;
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext&) override {
    dx->Resize(dy.shape);
    cpu::Mul(dy.size(), dy.ptr(), mask_.ptr(), dx->ptr());
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
  void Forward(const Tensor& x, Tensor* y, LayerContext&) override {
    in_shape_ = x.shape;
    y->shape = OutputShape(x.shape);
    y->data = x.data;
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext&) override {
    dx->shape = in_shape_;
    dx->data = dy.data;
  }

 private:
  std::vector<int> in_shape_;
};

}  // namespace

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
