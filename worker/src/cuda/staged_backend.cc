#include "staged_backend.h"

#include <array>
#include <cstring>
#include <vector>

#include "cuda_kernels.h"
#include "device_buffer.h"

namespace easyscale::cuda {
namespace {

// A host operand of one call: its bytes, and for outputs whether the kernel
// also reads them (accumulate), so they travel in both directions.
struct In {
  const void* host;
  size_t bytes;
};
struct Out {
  void* host;
  size_t bytes;
  bool read_too = false;
};

size_t Floats(size_t n) { return n * sizeof(float); }

class StagedBackend : public KernelBackend {
 public:
  std::string Name() const override { return "cuda"; }

  void Gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
            int ldc, bool accumulate) override {
    const size_t a = M > 0 ? Floats(static_cast<size_t>(M - 1) * lda + K) : 0;
    const size_t b = K > 0 ? Floats(static_cast<size_t>(K - 1) * ldb + N) : 0;
    const size_t c = M > 0 ? Floats(static_cast<size_t>(M - 1) * ldc + N) : 0;
    // Columns beyond N inside ldc must survive, so C also travels in then.
    Stage<2, 1>({In{A, a}, In{B, b}}, {Out{C, c, accumulate || ldc != N}}, [&](void** d) {
      return cuda::Gemm(M, N, K, F(d[0]), lda, F(d[1]), ldb, W(d[2]), ldc, accumulate);
    });
  }
  void Transpose(int rows, int cols, const float* src, float* dst) override {
    const size_t n = Floats(static_cast<size_t>(rows) * cols);
    Stage<1, 1>({In{src, n}}, {Out{dst, n}},
                [&](void** d) { return cuda::Transpose(rows, cols, F(d[0]), W(d[1])); });
  }
  void Im2Col(int B, int C, int H, int W_, int KH, int KW, const float* x, float* cols) override {
    const size_t in = Floats(static_cast<size_t>(B) * C * H * W_);
    const size_t out = Floats(static_cast<size_t>(C) * KH * KW * B * (H - KH + 1) * (W_ - KW + 1));
    Stage<1, 1>({In{x, in}}, {Out{cols, out}},
                [&](void** d) { return cuda::Im2Col(B, C, H, W_, KH, KW, F(d[0]), W(d[1])); });
  }
  void Col2Im(int B, int C, int H, int W_, int KH, int KW, const float* cols, float* dx) override {
    const size_t in = Floats(static_cast<size_t>(C) * KH * KW * B * (H - KH + 1) * (W_ - KW + 1));
    const size_t out = Floats(static_cast<size_t>(B) * C * H * W_);
    Stage<1, 1>({In{cols, in}}, {Out{dx, out}},
                [&](void** d) { return cuda::Col2Im(B, C, H, W_, KH, KW, F(d[0]), W(d[1])); });
  }
  void ChannelMajorToNchw(int B, int C, int P, const float* x, const float* bias,
                          float* y) override {
    const size_t n = Floats(static_cast<size_t>(B) * C * P);
    Stage<2, 1>({In{x, n}, In{bias, bias ? Floats(C) : 0}}, {Out{y, n}}, [&](void** d) {
      return cuda::ChannelMajorToNchw(B, C, P, F(d[0]), bias ? F(d[1]) : nullptr, W(d[2]));
    });
  }
  void NchwToChannelMajor(int B, int C, int P, const float* x, float* y) override {
    const size_t n = Floats(static_cast<size_t>(B) * C * P);
    Stage<1, 1>({In{x, n}}, {Out{y, n}},
                [&](void** d) { return cuda::NchwToChannelMajor(B, C, P, F(d[0]), W(d[1])); });
  }
  void ChannelSum(int B, int C, int P, const float* dy, float* bias_grad) override {
    Stage<1, 1>({In{dy, Floats(static_cast<size_t>(B) * C * P)}}, {Out{bias_grad, Floats(C)}},
                [&](void** d) { return cuda::ChannelSum(B, C, P, F(d[0]), W(d[1])); });
  }
  void AddRowBias(int rows, int cols, const float* bias, float* out) override {
    Stage<1, 1>({In{bias, Floats(cols)}},
                {Out{out, Floats(static_cast<size_t>(rows) * cols), true}},
                [&](void** d) { return cuda::AddRowBias(rows, cols, F(d[0]), W(d[1])); });
  }
  void ColumnSum(int rows, int cols, const float* dy, float* grad) override {
    Stage<1, 1>({In{dy, Floats(static_cast<size_t>(rows) * cols)}}, {Out{grad, Floats(cols)}},
                [&](void** d) { return cuda::ColumnSum(rows, cols, F(d[0]), W(d[1])); });
  }
  void Relu(size_t n, const float* x, float* y) override {
    Stage<1, 1>({In{x, Floats(n)}}, {Out{y, Floats(n)}},
                [&](void** d) { return cuda::Relu(n, F(d[0]), W(d[1])); });
  }
  void ReluBackward(size_t n, const float* y, const float* dy, float* dx) override {
    Stage<2, 1>({In{y, Floats(n)}, In{dy, Floats(n)}}, {Out{dx, Floats(n)}},
                [&](void** d) { return cuda::ReluBackward(n, F(d[0]), F(d[1]), W(d[2])); });
  }
  void MaxPool2(int B, int C, int H, int W_, const float* x, float* y, int32_t* argmax) override {
    const size_t in = static_cast<size_t>(B) * C * H * W_, out = in / 4;
    Stage<1, 2>({In{x, Floats(in)}}, {Out{y, Floats(out)}, Out{argmax, out * sizeof(int32_t)}},
                [&](void** d) {
                  return cuda::MaxPool2(B, C, H, W_, F(d[0]), W(d[1]), static_cast<int32_t*>(d[2]));
                });
  }
  void MaxPool2Backward(int B, int C, int H, int W_, const float* dy, const int32_t* argmax,
                        float* dx) override {
    const size_t in = static_cast<size_t>(B) * C * H * W_, out = in / 4;
    Stage<2, 1>({In{dy, Floats(out)}, In{argmax, out * sizeof(int32_t)}}, {Out{dx, Floats(in)}},
                [&](void** d) {
                  return cuda::MaxPool2Backward(B, C, H, W_, F(d[0]),
                                                static_cast<const int32_t*>(d[1]), W(d[2]));
                });
  }
  void AvgPool2(int B, int C, int H, int W_, const float* x, float* y) override {
    const size_t in = static_cast<size_t>(B) * C * H * W_;
    Stage<1, 1>({In{x, Floats(in)}}, {Out{y, Floats(in / 4)}},
                [&](void** d) { return cuda::AvgPool2(B, C, H, W_, F(d[0]), W(d[1])); });
  }
  void AvgPool2Backward(int B, int C, int H, int W_, const float* dy, float* dx) override {
    const size_t in = static_cast<size_t>(B) * C * H * W_;
    Stage<1, 1>({In{dy, Floats(in / 4)}}, {Out{dx, Floats(in)}},
                [&](void** d) { return cuda::AvgPool2Backward(B, C, H, W_, F(d[0]), W(d[1])); });
  }
  void BatchNormTrain(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                      float eps, float momentum, float* running_mean, float* running_var, float* y,
                      float* save_mean, float* save_invstd) override {
    const size_t n = Floats(static_cast<size_t>(B) * C * P), c = Floats(C);
    Stage<3, 5>({In{x, n}, In{gamma, c}, In{beta, c}},
                {Out{running_mean, c, true}, Out{running_var, c, true}, Out{y, n},
                 Out{save_mean, c}, Out{save_invstd, c}},
                [&](void** d) {
                  return cuda::BatchNormTrain(B, C, P, F(d[0]), F(d[1]), F(d[2]), eps, momentum,
                                              W(d[3]), W(d[4]), W(d[5]), W(d[6]), W(d[7]));
                });
  }
  void BatchNormEval(int B, int C, int P, const float* x, const float* gamma, const float* beta,
                     float eps, const float* running_mean, const float* running_var,
                     float* y) override {
    const size_t n = Floats(static_cast<size_t>(B) * C * P), c = Floats(C);
    Stage<5, 1>({In{x, n}, In{gamma, c}, In{beta, c}, In{running_mean, c}, In{running_var, c}},
                {Out{y, n}}, [&](void** d) {
                  return cuda::BatchNormEval(B, C, P, F(d[0]), F(d[1]), F(d[2]), eps, F(d[3]),
                                             F(d[4]), W(d[5]));
                });
  }
  void BatchNormBackward(int B, int C, int P, const float* x, const float* dy, const float* gamma,
                         const float* save_mean, const float* save_invstd, float* dx, float* dgamma,
                         float* dbeta) override {
    const size_t n = Floats(static_cast<size_t>(B) * C * P), c = Floats(C);
    Stage<5, 3>({In{x, n}, In{dy, n}, In{gamma, c}, In{save_mean, c}, In{save_invstd, c}},
                {Out{dx, n}, Out{dgamma, c}, Out{dbeta, c}}, [&](void** d) {
                  return cuda::BatchNormBackward(B, C, P, F(d[0]), F(d[1]), F(d[2]), F(d[3]),
                                                 F(d[4]), W(d[5]), W(d[6]), W(d[7]));
                });
  }
  void Dropout(size_t n, float p, uint32_t key0, uint32_t key1, uint64_t counter_base,
               const float* x, float* y, float* mask) override {
    Stage<1, 2>({In{x, Floats(n)}}, {Out{y, Floats(n)}, Out{mask, Floats(n)}}, [&](void** d) {
      return cuda::Dropout(n, p, key0, key1, counter_base, F(d[0]), W(d[1]), W(d[2]));
    });
  }
  void Mul(size_t n, const float* a, const float* b, float* out) override {
    Stage<2, 1>({In{a, Floats(n)}, In{b, Floats(n)}}, {Out{out, Floats(n)}},
                [&](void** d) { return cuda::Mul(n, F(d[0]), F(d[1]), W(d[2])); });
  }
  float SoftmaxCrossEntropy(int rows, int classes, const float* logits, const int32_t* labels,
                            float* dlogits) override {
    const size_t n = Floats(static_cast<size_t>(rows) * classes);
    float loss = 0.0f;
    Stage<2, 2>({In{logits, n}, In{labels, rows * sizeof(int32_t)}},
                {Out{dlogits, n}, Out{&loss, sizeof loss}}, [&](void** d) {
                  return cuda::SoftmaxCrossEntropy(
                      rows, classes, F(d[0]), static_cast<const int32_t*>(d[1]), W(d[2]), W(d[3]));
                });
    return loss;
  }
  void Argmax(int rows, int classes, const float* logits, int32_t* out) override {
    Stage<1, 1>({In{logits, Floats(static_cast<size_t>(rows) * classes)}},
                {Out{out, rows * sizeof(int32_t)}}, [&](void** d) {
                  return cuda::Argmax(rows, classes, F(d[0]), static_cast<int32_t*>(d[1]));
                });
  }

 private:
  static const float* F(void* p) { return static_cast<const float*>(p); }
  static float* W(void* p) { return static_cast<float*>(p); }

  // Copies the inputs (and read-too outputs) into device scratch, runs `launch`
  // with the device addresses (inputs first, then outputs), waits, and copies
  // the outputs back. Throws CudaError on any failure.
  template <size_t NI, size_t NO, typename Launch>
  void Stage(const std::array<In, NI>& ins, const std::array<Out, NO>& outs, Launch launch) {
    if (scratch_.size() < NI + NO) scratch_.resize(NI + NO);
    void* dev[NI + NO];
    for (size_t i = 0; i < NI; ++i) {
      dev[i] = Slot(i, ins[i].bytes);
      if (ins[i].bytes > 0)
        ThrowIfError(cudaMemcpy(dev[i], ins[i].host, ins[i].bytes, cudaMemcpyHostToDevice),
                     "copy to device");
    }
    for (size_t o = 0; o < NO; ++o) {
      dev[NI + o] = Slot(NI + o, outs[o].bytes);
      if (outs[o].read_too && outs[o].bytes > 0)
        ThrowIfError(cudaMemcpy(dev[NI + o], outs[o].host, outs[o].bytes, cudaMemcpyHostToDevice),
                     "copy to device");
    }
    ThrowIfError(launch(dev), "kernel launch");
    ThrowIfError(cudaDeviceSynchronize(), "kernel");
    for (size_t o = 0; o < NO; ++o) {
      if (outs[o].bytes > 0)
        ThrowIfError(cudaMemcpy(outs[o].host, dev[NI + o], outs[o].bytes, cudaMemcpyDeviceToHost),
                     "copy to host");
    }
  }
  // Device scratch for operand `slot`, grown (never shrunk) to `bytes`.
  void* Slot(size_t slot, size_t bytes) {
    DeviceBuffer<uint8_t>& b = scratch_[slot];
    if (b.size() < bytes) b.Resize(bytes);
    return b.get();
  }

  std::vector<DeviceBuffer<uint8_t>> scratch_;
};

}  // namespace

StatusOr<std::unique_ptr<KernelBackend>> MakeStagedKernelBackend() {
  std::string why;
  if (UsableDeviceCount(&why) == 0)
    return absl::FailedPreconditionError("backend \"cuda\": no usable GPU: " + why);
  return std::unique_ptr<KernelBackend>(new StagedBackend());
}

}  // namespace easyscale::cuda
