#include "easyscale/worker/layers.h"

#include <cstring>
#include <stdexcept>

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

}  // namespace

KernelBackend& CpuKernelBackend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace easyscale
