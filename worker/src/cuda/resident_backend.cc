#include "resident_backend.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda_kernels.h"
#include "device_buffer.h"

namespace easyscale::cuda {
namespace {

void Check(cudaError_t err, const char* what) { ThrowIfError(err, what); }

class ResidentBackend : public KernelBackend {
 public:
  explicit ResidentBackend(int device) {
    SelectDevice(device);
    Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  }
  ~ResidentBackend() override { cudaStreamDestroy(stream_); }
  ResidentBackend(const ResidentBackend&) = delete;
  ResidentBackend& operator=(const ResidentBackend&) = delete;

  std::string Name() const override { return "cuda"; }
  void Wait() override { Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  void InjectFault() override { Check(InjectIllegalAddress(stream_), "fault injection"); }
  void Copy(size_t bytes, const void* src, void* dst) override {
    if (bytes > 0 && src != dst)
      Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "device copy");
  }
  void Zero(size_t bytes, void* dst) override {
    if (bytes > 0) Check(cudaMemsetAsync(dst, 0, bytes, stream_), "device memset");
  }

  void Gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
            int ldc, bool accumulate) override {
    Check(cuda::Gemm(M, N, K, A, lda, B, ldb, C, ldc, accumulate, stream_), "Gemm");
  }
  void Transpose(int rows, int cols, const float* src, float* dst) override {
    Check(cuda::Transpose(rows, cols, src, dst, stream_), "Transpose");
  }
  void Im2Col(int B, int C, int H, int W, int KH, int KW, const float* x, float* cols) override {
    Check(cuda::Im2Col(B, C, H, W, KH, KW, x, cols, stream_), "Im2Col");
  }
  void Col2Im(int B, int C, int H, int W, int KH, int KW, const float* cols, float* dx) override {
    Check(cuda::Col2Im(B, C, H, W, KH, KW, cols, dx, stream_), "Col2Im");
  }
  void ChannelMajorToNchw(int B, int C, int P, const float* x, const float* bias,
                          float* y) override {
    Check(cuda::ChannelMajorToNchw(B, C, P, x, bias, y, stream_), "ChannelMajorToNchw");
  }
  void NchwToChannelMajor(int B, int C, int P, const float* x, float* y) override {
    Check(cuda::NchwToChannelMajor(B, C, P, x, y, stream_), "NchwToChannelMajor");
  }
  void ChannelSum(int B, int C, int P, const float* dy, float* bias_grad) override {
    Check(cuda::ChannelSum(B, C, P, dy, bias_grad, stream_), "ChannelSum");
  }
  void AddRowBias(int rows, int cols, const float* bias, float* out) override {
    Check(cuda::AddRowBias(rows, cols, bias, out, stream_), "AddRowBias");
  }
  void ColumnSum(int rows, int cols, const float* dy, float* grad) override {
    Check(cuda::ColumnSum(rows, cols, dy, grad, stream_), "ColumnSum");
  }
  void Relu(size_t n, const float* x, float* y) override {
    Check(cuda::Relu(n, x, y, stream_), "Relu");
  }
  void ReluBackward(size_t n, const float* y, const float* dy, float* dx) override {
    Check(cuda::ReluBackward(n, y, dy, dx, stream_), "ReluBackward");
  }
  void MaxPool2(int B, int C, int H, int W, const float* x, float* y, int32_t* argmax) override {
    Check(cuda::MaxPool2(B, C, H, W, x, y, argmax, stream_), "MaxPool2");
  }
  void MaxPool2Backward(int B, int C, int H, int W, const float* dy, const int32_t* argmax,
                        float* dx) override {
    Check(cuda::MaxPool2Backward(B, C, H, W, dy, argmax, dx, stream_), "MaxPool2Backward");
  }
  void AvgPool2(int B, int C, int H, int W, const float* x, float* y) override {
    Check(cuda::AvgPool2(B, C, H, W, x, y, stream_), "AvgPool2");
  }
  void AvgPool2Backward(int B, int C, int H, int W, const float* dy, float* dx) override {
    Check(cuda::AvgPool2Backward(B, C, H, W, dy, dx, stream_), "AvgPool2Backward");
  }
  void BatchNormTrain(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                      float eps, float momentum, float* running_mean, float* running_var, float* y,
                      float* save_mean, float* save_invstd) override {
    Check(cuda::BatchNormTrain(B, C, P, x, gamma, beta, eps, momentum, running_mean, running_var, y,
                               save_mean, save_invstd, stream_),
          "BatchNormTrain");
  }
  void BatchNormEval(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                     float eps, const float* running_mean, const float* running_var,
                     float* y) override {
    Check(cuda::BatchNormEval(B, C, P, x, gamma, beta, eps, running_mean, running_var, y, stream_),
          "BatchNormEval");
  }
  void BatchNormBackward(int B, int C, int P, const float* x, const float* dy, const float* gamma,
                         const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                         float* dbeta) override {
    Check(cuda::BatchNormBackward(B, C, P, x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta,
                                  stream_),
          "BatchNormBackward");
  }
  void Dropout(size_t n, float p, uint32_t key0, uint32_t key1, uint64_t counter_base,
               const float* x, float* y, float* mask) override {
    Check(cuda::Dropout(n, p, key0, key1, counter_base, x, y, mask, stream_), "Dropout");
  }
  void Mul(size_t n, const float* a, const float* b, float* out) override {
    Check(cuda::Mul(n, a, b, out, stream_), "Mul");
  }
  void SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                           float* dlogits, float* loss) override {
    Check(cuda::SoftmaxCrossEntropy(rows, classes, logits, labels, dlogits, loss, stream_),
          "SoftmaxCrossEntropy");
  }
  void AccumulateFixedPoint(std::span<const float* const> segments, std::span<const size_t> sizes,
                            int64_t max_terms, int64_t* acc, int32_t* nonfinite) override {
    for (size_t first = 0; first < segments.size(); first += kMaxFixedPointSegments) {
      const size_t count = std::min<size_t>(kMaxFixedPointSegments, segments.size() - first);
      Check(cuda::AccumulateFixedPoint(static_cast<int>(count), segments.data() + first,
                                       sizes.data() + first, max_terms, acc, nonfinite + first,
                                       stream_),
            "AccumulateFixedPoint");
      for (size_t s = first; s < first + count; ++s) acc += sizes[s];
    }
  }
  void Argmax(int rows, int classes, const float* logits, int32_t* out) override {
    Check(cuda::Argmax(rows, classes, logits, out, stream_), "Argmax");
  }

 protected:
  void* AddressOf(void* host, size_t bytes, DeviceMirror& mirror) override {
    (void)host;
    if (mirror.bytes() != bytes) {
      mirror.Reset();
      if (bytes == 0) return nullptr;
      void* p = nullptr;
      Check(cudaMalloc(&p, bytes), "cudaMalloc");
      mirror.Adopt(p, bytes, [](void* q) { cudaFree(q); });
    }
    return mirror.get();
  }
  void CopyToDevice(const void* host, size_t bytes, DeviceMirror& mirror) override {
    void* dev = AddressOf(const_cast<void*>(host), bytes, mirror);
    if (bytes > 0)
      Check(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream_), "copy to device");
  }
  void CopyToHost(void* host, size_t bytes, DeviceMirror& mirror) override {
    if (bytes == 0) return;
    if (mirror.bytes() != bytes)
      throw std::logic_error("download of a tensor the device never had");
    Check(cudaMemcpyAsync(host, mirror.get(), bytes, cudaMemcpyDeviceToHost, stream_),
          "copy to host");
    Wait();
  }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<KernelBackend>> MakeResidentKernelBackend(int device) {
  std::string why;
  if (UsableDeviceCount(&why) == 0)
    return absl::FailedPreconditionError("backend \"cuda\": no usable GPU: " + why);
  try {
    return std::unique_ptr<KernelBackend>(new ResidentBackend(device));
  } catch (const CudaError& e) {
    return absl::FailedPreconditionError(std::string("backend \"cuda\": ") + e.what());
  }
}

}  // namespace easyscale::cuda
