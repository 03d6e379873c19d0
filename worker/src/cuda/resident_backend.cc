#include "resident_backend.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_kernels.h"
#include "device_buffer.h"

namespace easyscale::cuda {
namespace {

void Check(cudaError_t err, const char* what) { ThrowIfError(err, what); }

// Lane 0 is the backend's stream; the others are streams of their own, made
// on first use, ordered after lane 0 by one event at ForkLanes and before it by
// one event each at JoinLanes.
constexpr int kLanes = 8;

class ResidentBackend : public KernelBackend {
 public:
  explicit ResidentBackend(int device) {
    SelectDevice(device);
    for (Lane& lane : lanes_) {
      Check(cudaEventCreateWithFlags(&lane.done, cudaEventDisableTiming), "event");
    }
    Check(cudaStreamCreateWithFlags(&lanes_[0].stream, cudaStreamNonBlocking), "stream");
    stream_ = lanes_[0].stream;
  }
  ~ResidentBackend() override {
    for (Lane& lane : lanes_) {
      if (lane.stream != nullptr) cudaStreamDestroy(lane.stream);
      cudaEventDestroy(lane.done);
    }
  }
  ResidentBackend(const ResidentBackend&) = delete;
  ResidentBackend& operator=(const ResidentBackend&) = delete;

  std::string Name() const override { return "cuda"; }
  bool OnDevice() const override { return true; }
  void* Stream() override { return stream_; }
  void Wait() override {
    if (forked_) throw std::logic_error("Wait between ForkLanes and JoinLanes");
    Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void InjectFault() override { Check(InjectIllegalAddress(stream_), "fault injection"); }

  int Lanes() const override { return kLanes; }
  void ForkLanes() override {
    // A fork still open here was cut short by a failed step: start over on lane 0.
    stream_ = lanes_[0].stream;
    Check(cudaEventRecord(lanes_[0].done, lanes_[0].stream), "cudaEventRecord");
    for (Lane& lane : lanes_) lane.in_fork = false;
    forked_ = true;
  }
  void UseLane(int lane) override {
    if (!forked_ || lane < 0 || lane >= kLanes)
      throw std::logic_error("UseLane outside a fork or out of range");
    Lane& l = lanes_[lane];
    if (l.stream == nullptr)
      Check(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking), "stream");
    if (lane > 0 && !l.in_fork) {
      Check(cudaStreamWaitEvent(l.stream, lanes_[0].done, 0), "cudaStreamWaitEvent");
      l.in_fork = true;
    }
    stream_ = l.stream;
  }
  void JoinLanes() override {
    if (!forked_) throw std::logic_error("JoinLanes without ForkLanes");
    for (int i = 1; i < kLanes; ++i) {
      if (!lanes_[i].in_fork) continue;
      Check(cudaEventRecord(lanes_[i].done, lanes_[i].stream), "cudaEventRecord");
      Check(cudaStreamWaitEvent(lanes_[0].stream, lanes_[i].done, 0), "cudaStreamWaitEvent");
    }
    stream_ = lanes_[0].stream;
    forked_ = false;
  }
  void Copy(size_t bytes, const void* src, void* dst) override {
    if (bytes == 0 || src == dst) return;
    Run("Copy", {Word(bytes), Word(src), Word(dst)}, [=](cudaStream_t st) {
      return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st);
    });
  }
  void Zero(size_t bytes, void* dst) override {
    if (bytes == 0) return;
    Run("Zero", {Word(bytes), Word(dst)},
        [=](cudaStream_t st) { return cudaMemsetAsync(dst, 0, bytes, st); });
  }

  void Gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
            int ldc, bool accumulate) override {
    Run("Gemm",
        {Word(M), Word(N), Word(K), Word(A), Word(lda), Word(B), Word(ldb), Word(C), Word(ldc),
         Word(accumulate)},
        [=](cudaStream_t st) {
          return cuda::Gemm(M, N, K, A, lda, B, ldb, C, ldc, accumulate, st);
        });
  }
  void Transpose(int rows, int cols, const float* src, float* dst) override {
    Run("Transpose", {Word(rows), Word(cols), Word(src), Word(dst)},
        [=](cudaStream_t st) { return cuda::Transpose(rows, cols, src, dst, st); });
  }
  void Im2Col(int B, int C, int H, int W, int KH, int KW, const float* x, float* cols) override {
    Run("Im2Col", {Word(B), Word(C), Word(H), Word(W), Word(KH), Word(KW), Word(x), Word(cols)},
        [=](cudaStream_t st) { return cuda::Im2Col(B, C, H, W, KH, KW, x, cols, st); });
  }
  void Col2Im(int B, int C, int H, int W, int KH, int KW, const float* cols, float* dx) override {
    Run("Col2Im", {Word(B), Word(C), Word(H), Word(W), Word(KH), Word(KW), Word(cols), Word(dx)},
        [=](cudaStream_t st) { return cuda::Col2Im(B, C, H, W, KH, KW, cols, dx, st); });
  }
  void ChannelMajorToNchw(int B, int C, int P, const float* x, const float* bias,
                          float* y) override {
    Run("ChannelMajorToNchw", {Word(B), Word(C), Word(P), Word(x), Word(bias), Word(y)},
        [=](cudaStream_t st) { return cuda::ChannelMajorToNchw(B, C, P, x, bias, y, st); });
  }
  void NchwToChannelMajor(int B, int C, int P, const float* x, float* y) override {
    Run("NchwToChannelMajor", {Word(B), Word(C), Word(P), Word(x), Word(y)},
        [=](cudaStream_t st) { return cuda::NchwToChannelMajor(B, C, P, x, y, st); });
  }
  void ChannelSum(int B, int C, int P, const float* dy, float* bias_grad) override {
    Run("ChannelSum", {Word(B), Word(C), Word(P), Word(dy), Word(bias_grad)},
        [=](cudaStream_t st) { return cuda::ChannelSum(B, C, P, dy, bias_grad, st); });
  }
  void AddRowBias(int rows, int cols, const float* bias, float* out) override {
    Run("AddRowBias", {Word(rows), Word(cols), Word(bias), Word(out)},
        [=](cudaStream_t st) { return cuda::AddRowBias(rows, cols, bias, out, st); });
  }
  void ColumnSum(int rows, int cols, const float* dy, float* grad) override {
    Run("ColumnSum", {Word(rows), Word(cols), Word(dy), Word(grad)},
        [=](cudaStream_t st) { return cuda::ColumnSum(rows, cols, dy, grad, st); });
  }
  void Relu(size_t n, const float* x, float* y) override {
    Run("Relu", {Word(n), Word(x), Word(y)},
        [=](cudaStream_t st) { return cuda::Relu(n, x, y, st); });
  }
  void ReluBackward(size_t n, const float* y, const float* dy, float* dx) override {
    Run("ReluBackward", {Word(n), Word(y), Word(dy), Word(dx)},
        [=](cudaStream_t st) { return cuda::ReluBackward(n, y, dy, dx, st); });
  }
  void MaxPool2(int B, int C, int H, int W, const float* x, float* y, int32_t* argmax) override {
    Run("MaxPool2", {Word(B), Word(C), Word(H), Word(W), Word(x), Word(y), Word(argmax)},
        [=](cudaStream_t st) { return cuda::MaxPool2(B, C, H, W, x, y, argmax, st); });
  }
  void MaxPool2Backward(int B, int C, int H, int W, const float* dy, const int32_t* argmax,
                        float* dx) override {
    Run("MaxPool2Backward", {Word(B), Word(C), Word(H), Word(W), Word(dy), Word(argmax), Word(dx)},
        [=](cudaStream_t st) { return cuda::MaxPool2Backward(B, C, H, W, dy, argmax, dx, st); });
  }
  void AvgPool2(int B, int C, int H, int W, const float* x, float* y) override {
    Run("AvgPool2", {Word(B), Word(C), Word(H), Word(W), Word(x), Word(y)},
        [=](cudaStream_t st) { return cuda::AvgPool2(B, C, H, W, x, y, st); });
  }
  void AvgPool2Backward(int B, int C, int H, int W, const float* dy, float* dx) override {
    Run("AvgPool2Backward", {Word(B), Word(C), Word(H), Word(W), Word(dy), Word(dx)},
        [=](cudaStream_t st) { return cuda::AvgPool2Backward(B, C, H, W, dy, dx, st); });
  }
  void BatchNormTrain(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                      float eps, float momentum, float* running_mean, float* running_var, float* y,
                      float* save_mean, float* save_invstd) override {
    Run("BatchNormTrain",
        {Word(B), Word(C), Word(P), Word(x), Word(gamma), Word(beta), Word(eps), Word(momentum),
         Word(running_mean), Word(running_var), Word(y), Word(save_mean), Word(save_invstd)},
        [=](cudaStream_t st) {
          return cuda::BatchNormTrain(B, C, P, x, gamma, beta, eps, momentum, running_mean,
                                      running_var, y, save_mean, save_invstd, st);
        });
  }
  void BatchNormEval(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                     float eps, const float* running_mean, const float* running_var,
                     float* y) override {
    Run("BatchNormEval",
        {Word(B), Word(C), Word(P), Word(x), Word(gamma), Word(beta), Word(eps), Word(running_mean),
         Word(running_var), Word(y)},
        [=](cudaStream_t st) {
          return cuda::BatchNormEval(B, C, P, x, gamma, beta, eps, running_mean, running_var, y,
                                     st);
        });
  }
  void BatchNormBackward(int B, int C, int P, const float* x, const float* dy, const float* gamma,
                         const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                         float* dbeta) override {
    Run("BatchNormBackward",
        {Word(B), Word(C), Word(P), Word(x), Word(dy), Word(gamma), Word(save_mean),
         Word(save_invstd), Word(dx), Word(dgamma), Word(dbeta)},
        [=](cudaStream_t st) {
          return cuda::BatchNormBackward(B, C, P, x, dy, gamma, save_mean, save_invstd, dx, dgamma,
                                         dbeta, st);
        });
  }
  void Dropout(size_t n, float p, uint32_t key0, uint32_t key1, uint64_t counter_base,
               const float* x, float* y, float* mask) override {
    Check(cuda::Dropout(n, p, key0, key1, counter_base, x, y, mask, stream_), "Dropout");
  }
  void Mul(size_t n, const float* a, const float* b, float* out) override {
    Run("Mul", {Word(n), Word(a), Word(b), Word(out)},
        [=](cudaStream_t st) { return cuda::Mul(n, a, b, out, st); });
  }
  void SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                           float* dlogits, float* loss) override {
    Run("SoftmaxCrossEntropy",
        {Word(rows), Word(classes), Word(logits), Word(labels), Word(dlogits), Word(loss)},
        [=](cudaStream_t st) {
          return cuda::SoftmaxCrossEntropy(rows, classes, logits, labels, dlogits, loss, st);
        });
  }
  void AccumulateFixedPoint(std::span<const float* const> segments, std::span<const size_t> sizes,
                            int64_t max_terms, int64_t* acc, int32_t* nonfinite) override {
    for (size_t first = 0; first < segments.size(); first += kMaxFixedPointSegments) {
      const size_t count = std::min<size_t>(kMaxFixedPointSegments, segments.size() - first);
      std::vector<const float*> seg(segments.begin() + first, segments.begin() + first + count);
      std::vector<size_t> size(sizes.begin() + first, sizes.begin() + first + count);
      std::vector<uint64_t> words = {Word(max_terms), Word(acc), Word(nonfinite + first)};
      for (size_t i = 0; i < count; ++i) words.push_back(Word(seg[i])), words.push_back(size[i]);
      int32_t* flags = nonfinite + first;
      Run("AccumulateFixedPoint", std::move(words), [=](cudaStream_t st) {
        return cuda::AccumulateFixedPoint(static_cast<int>(count), seg.data(), size.data(),
                                          max_terms, acc, flags, st);
      });
      for (size_t s = first; s < first + count; ++s) acc += sizes[s];
    }
  }
  void AddFixedPointSums(size_t n, const int64_t* src, int64_t* dst) override {
    Run("AddFixedPointSums", {Word(n), Word(src), Word(dst)},
        [=](cudaStream_t st) { return cuda::AddFixedPointSums(n, src, dst, st); });
  }
  void Argmax(int rows, int classes, const float* logits, int32_t* out) override {
    Run("Argmax", {Word(rows), Word(classes), Word(logits), Word(out)},
        [=](cudaStream_t st) { return cuda::Argmax(rows, classes, logits, out, st); });
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
  template <typename T>
  static uint64_t Word(T v) {
    if constexpr (std::is_pointer_v<T>) {
      return reinterpret_cast<uintptr_t>(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      return std::bit_cast<uint32_t>(static_cast<float>(v));
    } else {
      return static_cast<uint64_t>(v);
    }
  }
  // Queues a kernel on the current lane.
  void Run(const char* what, std::vector<uint64_t>,
           std::function<cudaError_t(cudaStream_t)> launch) {
    Check(launch(stream_), what);
  }

  struct Lane {
    cudaStream_t stream = nullptr;
    cudaEvent_t done = nullptr;
    bool in_fork = false;  // waits on this fork's event; lane 0 waits on it at the join
  };
  Lane lanes_[kLanes];
  cudaStream_t stream_ = nullptr;  // the current lane's
  bool forked_ = false;
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
