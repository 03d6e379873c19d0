#include "easyscale/worker/layers.h"

#include "easyscale/common/checks.h"
#include "easyscale/worker/cpu_kernels.h"

namespace easyscale {
namespace {

class CpuBackend : public KernelBackend {
 public:
  std::string Name() const override { return "cpu"; }
  void Gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
            int ldc, bool accumulate) override {
    cpu::Gemm(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
  }
  void Transpose(int rows, int cols, const float* src, float* dst) override {
    cpu::Transpose(rows, cols, src, dst);
  }
  void Im2Col(int B, int C, int H, int W, int KH, int KW, const float* x, float* cols) override {
    cpu::Im2Col(B, C, H, W, KH, KW, x, cols);
  }
  void Col2Im(int B, int C, int H, int W, int KH, int KW, const float* cols, float* dx) override {
    cpu::Col2Im(B, C, H, W, KH, KW, cols, dx);
  }
  void ChannelMajorToNchw(int B, int C, int P, const float* x, const float* bias,
                          float* y) override {
    cpu::ChannelMajorToNchw(B, C, P, x, bias, y);
  }
  void NchwToChannelMajor(int B, int C, int P, const float* x, float* y) override {
    cpu::NchwToChannelMajor(B, C, P, x, y);
  }
  void ChannelSum(int B, int C, int P, const float* dy, float* bias_grad) override {
    cpu::ChannelSum(B, C, P, dy, bias_grad);
  }
  void AddRowBias(int rows, int cols, const float* bias, float* out) override {
    cpu::AddRowBias(rows, cols, bias, out);
  }
  void ColumnSum(int rows, int cols, const float* dy, float* grad) override {
    cpu::ColumnSum(rows, cols, dy, grad);
  }
  void Relu(size_t n, const float* x, float* y) override { cpu::Relu(n, x, y); }
  void ReluBackward(size_t n, const float* y, const float* dy, float* dx) override {
    cpu::ReluBackward(n, y, dy, dx);
  }
  void MaxPool2(int B, int C, int H, int W, const float* x, float* y, int32_t* argmax) override {
    cpu::MaxPool2(B, C, H, W, x, y, argmax);
  }
  void MaxPool2Backward(int B, int C, int H, int W, const float* dy, const int32_t* argmax,
                        float* dx) override {
    cpu::MaxPool2Backward(B, C, H, W, dy, argmax, dx);
  }
  void AvgPool2(int B, int C, int H, int W, const float* x, float* y) override {
    cpu::AvgPool2(B, C, H, W, x, y);
  }
  void AvgPool2Backward(int B, int C, int H, int W, const float* dy, float* dx) override {
    cpu::AvgPool2Backward(B, C, H, W, dy, dx);
  }
  void BatchNormTrain(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                      float eps, float momentum, float* running_mean, float* running_var, float* y,
                      float* save_mean, float* save_invstd) override {
    cpu::BatchNormTrain(B, C, P, x, gamma, beta, eps, momentum, running_mean, running_var, y,
                        save_mean, save_invstd);
  }
  void BatchNormEval(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                     float eps, const float* running_mean, const float* running_var,
                     float* y) override {
    cpu::BatchNormEval(B, C, P, x, gamma, beta, eps, running_mean, running_var, y);
  }
  void BatchNormBackward(int B, int C, int P, const float* x, const float* dy, const float* gamma,
                         const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                         float* dbeta) override {
    cpu::BatchNormBackward(B, C, P, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
  }
  void Dropout(size_t n, float p, uint32_t key0, uint32_t key1, uint64_t counter_base,
               const float* x, float* y, float* mask) override {
    cpu::Dropout(n, p, key0, key1, counter_base, x, y, mask);
  }
  void Mul(size_t n, const float* a, const float* b, float* out) override {
    cpu::Mul(n, a, b, out);
  }
  float SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                            float* dlogits) override {
    return cpu::SoftmaxCrossEntropy(rows, classes, logits, labels, dlogits);
  }
  void Argmax(int rows, int classes, const float* logits, int32_t* out) override {
    cpu::Argmax(rows, classes, logits, out);
  }
};

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
  void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) override {
    B_ = x.dim(0), H_ = x.dim(2), W_ = x.dim(3);
    const int OH = H_ - k_ + 1, OW = W_ - k_ + 1, ckk = in_ * k_ * k_;
    const int cols = B_ * OH * OW;
    cols_.Resize({ckk, cols});
    ctx.k().Im2Col(B_, in_, H_, W_, k_, k_, x.ptr(), cols_.ptr());
    out_cm_.Resize({out_, cols});
    ctx.k().Gemm(out_, cols, ckk, weight_.value.ptr(), ckk, cols_.ptr(), cols, out_cm_.ptr(), cols,
                 false);
    y->Resize({B_, out_, OH, OW});
    ctx.k().ChannelMajorToNchw(B_, out_, OH * OW, out_cm_.ptr(), bias_.value.ptr(), y->ptr());
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    const int OH = H_ - k_ + 1, OW = W_ - k_ + 1, ckk = in_ * k_ * k_;
    const int cols = B_ * OH * OW;
    ctx.k().ChannelSum(B_, out_, OH * OW, dy.ptr(), bias_.grad.ptr());
    dy_cm_.Resize({out_, cols});
    ctx.k().NchwToChannelMajor(B_, out_, OH * OW, dy.ptr(), dy_cm_.ptr());
    // dW[o, r] = sum over columns (b, p) ascending of dy[o, col] * cols[r, col].
    cols_t_.Resize({cols, ckk});
    ctx.k().Transpose(ckk, cols, cols_.ptr(), cols_t_.ptr());
    ctx.k().Gemm(out_, ckk, cols, dy_cm_.ptr(), cols, cols_t_.ptr(), ckk, weight_.grad.ptr(), ckk,
                 false);
    if (dx == nullptr) return;
    // dcols[r, col] = sum over o ascending of W[o, r] * dy[o, col].
    w_t_.Resize({ckk, out_});
    ctx.k().Transpose(out_, ckk, weight_.value.ptr(), w_t_.ptr());
    dcols_.Resize({ckk, cols});
    ctx.k().Gemm(ckk, cols, out_, w_t_.ptr(), out_, dy_cm_.ptr(), cols, dcols_.ptr(), cols, false);
    dx->Resize({B_, in_, H_, W_});
    ctx.k().Col2Im(B_, in_, H_, W_, k_, k_, dcols_.ptr(), dx->ptr());
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
    w_t_.Resize({in_, out_});
    ctx.k().Transpose(out_, in_, weight_.value.ptr(), w_t_.ptr());
    y->Resize({B, out_});
    ctx.k().Gemm(B, out_, in_, x.ptr(), in_, w_t_.ptr(), out_, y->ptr(), out_, false);
    ctx.k().AddRowBias(B, out_, bias_.value.ptr(), y->ptr());
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    const int B = dy.dim(0);
    ctx.k().ColumnSum(B, out_, dy.ptr(), bias_.grad.ptr());
    dy_t_.Resize({out_, B});
    ctx.k().Transpose(B, out_, dy.ptr(), dy_t_.ptr());
    ctx.k().Gemm(out_, in_, B, dy_t_.ptr(), B, x_->ptr(), in_, weight_.grad.ptr(), in_, false);
    if (dx == nullptr) return;
    dx->Resize({B, in_});
    ctx.k().Gemm(B, in_, out_, dy.ptr(), out_, weight_.value.ptr(), in_, dx->ptr(), in_, false);
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
      ctx.k().BatchNormTrain(B, c_, P, x.ptr(), gamma_.value.ptr(), beta_.value.ptr(), kEps,
                             kMomentum, mean.ptr(), var.ptr(), y->ptr(), save_mean_.ptr(),
                             save_invstd_.ptr());
    } else {
      ctx.k().BatchNormEval(B, c_, P, x.ptr(), gamma_.value.ptr(), beta_.value.ptr(), kEps,
                            mean.ptr(), var.ptr(), y->ptr());
    }
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    dx->Resize(dy.shape);
    const int B = dy.dim(0), P = dy.dim(2) * dy.dim(3);
    ctx.k().BatchNormBackward(B, c_, P, x_->ptr(), dy.ptr(), gamma_.value.ptr(), save_mean_.ptr(),
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
  void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) override {
    y->Resize(x.shape);
    ctx.k().Relu(x.size(), x.ptr(), y->ptr());
    y_ = y;
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    dx->Resize(dy.shape);
    ctx.k().ReluBackward(dy.size(), y_->ptr(), dy.ptr(), dx->ptr());
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
    if (max_) {
      argmax_.resize(y->size());
      ctx.k().MaxPool2(x.dim(0), x.dim(1), x.dim(2), x.dim(3), x.ptr(), y->ptr(), argmax_.data());
    } else {
      ctx.k().AvgPool2(x.dim(0), x.dim(1), x.dim(2), x.dim(3), x.ptr(), y->ptr());
    }
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    dx->Resize(in_shape_);
    const auto& s = in_shape_;
    if (max_) {
      ctx.k().MaxPool2Backward(s[0], s[1], s[2], s[3], dy.ptr(), argmax_.data(), dx->ptr());
    } else {
      ctx.k().AvgPool2Backward(s[0], s[1], s[2], s[3], dy.ptr(), dx->ptr());
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
    ctx.k().Dropout(x.size(), p_, ctx.dropout_key.k0, ctx.dropout_key.k1, *ctx.dropout_counter,
                    x.ptr(), y->ptr(), mask_.ptr());
    *ctx.dropout_counter += (x.size() + 3) / 4;
  }
  void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) override {
    dx->Resize(dy.shape);
    ctx.k().Mul(dy.size(), dy.ptr(), mask_.ptr(), dx->ptr());
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
