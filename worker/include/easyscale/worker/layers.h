// File: easyscale/worker/layers.h
//
// What a model's passes run with. Parameters (and their gradients) are shared
// by all ESTs of a worker; per-EST state (BatchNorm running statistics, the
// dropout stream) lives in the EST and is bound through LayerContext on every
// call, so switching EST costs a pointer swap.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "easyscale/worker/philox.h"
#include "easyscale/worker/tensor.h"

namespace easyscale {

struct Param {
  std::string name;  // the PyTorch state_dict key, the graph's initializer ("0.weight")
  Tensor value;
  Tensor grad;
};

// The kernels layers run: the CPU kernels (cpu_kernels.h, which documents each
// one's operation order), or another device's kernels computing the same bits.
// Kernels take addresses in the backend's memory (At): a tensor's host data on
// the CPU, its device mirror on a device, where kernels may run asynchronously
// until Download or Wait. A failing device throws std::runtime_error.
class KernelBackend {
 public:
  virtual ~KernelBackend() = default;
  virtual std::string Name() const = 0;

  // Where the kernels find a tensor's elements; a missing or differently sized
  // mirror is (re)allocated, its contents undefined until written or uploaded.
  template <typename T>
  T* At(TensorOf<T>& t) {
    return static_cast<T*>(AddressOf(t.ptr(), t.bytes(), t.mirror));
  }
  template <typename T>
  const T* At(const TensorOf<T>& t) {
    return static_cast<const T*>(AddressOf(const_cast<T*>(t.ptr()), t.bytes(), t.mirror));
  }
  // Host elements to the backend's copy; back to the host after queued work.
  template <typename T>
  void Upload(const TensorOf<T>& t) {
    CopyToDevice(t.ptr(), t.bytes(), t.mirror);
  }
  template <typename T>
  void Download(TensorOf<T>& t) {
    CopyToHost(t.ptr(), t.bytes(), t.mirror);
  }
  // Waits for queued work, throwing the device's error if it failed.
  virtual void Wait() = 0;
  // Test-only: the backend fails as a device fault would (a CUDA backend's next
  // kernel writes to an illegal address; the CPU's throws at once).
  virtual void InjectFault() = 0;

  // The calls between these repeat every step for `key` with the same shapes
  // and addresses (only Dropout's counter changes): a device backend may replay
  // them as one recorded graph. No upload, download or wait in between.
  virtual void BeginRepeatable(uint64_t key) { (void)key; }
  virtual void EndRepeatable() {}

  // Lanes: queues of work that may run at the same time (a device's streams).
  // After ForkLanes, calls go to the lane UseLane named last (lane 0 is where
  // everything else runs), each lane after the work queued before ForkLanes;
  // after JoinLanes, calls run after everything queued on every lane. A step
  // spreads its hosted ESTs over Lanes() lanes; 1 runs them one after another.
  virtual int Lanes() const { return 1; }
  virtual void ForkLanes() {}
  virtual void UseLane(int lane) { (void)lane; }
  virtual void JoinLanes() {}

  virtual void Copy(size_t bytes, const void* src, void* dst) = 0;
  virtual void Zero(size_t bytes, void* dst) = 0;
  virtual void Gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C,
                    int ldc, bool accumulate) = 0;
  virtual void Transpose(int rows, int cols, const float* src, float* dst) = 0;
  virtual void Im2Col(int B, int C, int H, int W, int KH, int KW, const float* x, float* cols) = 0;
  virtual void Col2Im(int B, int C, int H, int W, int KH, int KW, const float* cols, float* dx) = 0;
  virtual void ChannelMajorToNchw(int B, int C, int P, const float* x, const float* bias,
                                  float* y) = 0;
  virtual void NchwToChannelMajor(int B, int C, int P, const float* x, float* y) = 0;
  virtual void ChannelSum(int B, int C, int P, const float* dy, float* bias_grad) = 0;
  virtual void AddRowBias(int rows, int cols, const float* bias, float* out) = 0;
  virtual void ColumnSum(int rows, int cols, const float* dy, float* grad) = 0;
  virtual void Relu(size_t n, const float* x, float* y) = 0;
  virtual void ReluBackward(size_t n, const float* y, const float* dy, float* dx) = 0;
  virtual void MaxPool2(int B, int C, int H, int W, const float* x, float* y, int32_t* argmax) = 0;
  virtual void MaxPool2Backward(int B, int C, int H, int W, const float* dy, const int32_t* argmax,
                                float* dx) = 0;
  virtual void AvgPool2(int B, int C, int H, int W, const float* x, float* y) = 0;
  virtual void AvgPool2Backward(int B, int C, int H, int W, const float* dy, float* dx) = 0;
  virtual void BatchNormTrain(int B, int C, int P, const float* x, const float* gamma,
                              const float* beta, float eps, float momentum, float* running_mean,
                              float* running_var, float* y, float* save_mean,
                              float* save_invstd) = 0;
  virtual void BatchNormEval(int B, int C, int P, const float* x, const float* gamma,
                             const float* beta, float eps, const float* running_mean,
                             const float* running_var, float* y) = 0;
  virtual void BatchNormBackward(int B, int C, int P, const float* x, const float* dy,
                                 const float* gamma, const float* save_mean,
                                 const float* save_invstd, float* dx, float* dgamma,
                                 float* dbeta) = 0;
  virtual void Dropout(size_t n, float p, uint32_t key0, uint32_t key1, uint64_t counter_base,
                       const float* x, float* y, float* mask) = 0;
  virtual void Mul(size_t n, const float* a, const float* b, float* out) = 0;
  // Writes the mean loss to loss[0] (backend memory) so a step need not wait.
  virtual void SoftmaxCrossEntropy(int rows, int classes, const float* logits,
                                   const int32_t* labels, float* dlogits, float* loss) = 0;
  // Folds gradient segments, laid end to end, into the fixed-point sums `acc`
  // (fixed_point.h); sets nonfinite[s] = 1 for a segment holding NaN or inf.
  virtual void AccumulateFixedPoint(std::span<const float* const> segments,
                                    std::span<const size_t> sizes, int64_t max_terms, int64_t* acc,
                                    int32_t* nonfinite) = 0;
  // dst[i] += src[i]: fixed-point sums of the same segments (exact, any order).
  virtual void AddFixedPointSums(size_t n, const int64_t* src, int64_t* dst) = 0;
  virtual void Argmax(int rows, int classes, const float* logits, int32_t* out) = 0;

 protected:
  virtual void* AddressOf(void* host, size_t bytes, DeviceMirror& mirror) = 0;
  virtual void CopyToDevice(const void* host, size_t bytes, DeviceMirror& mirror) = 0;
  virtual void CopyToHost(void* host, size_t bytes, DeviceMirror& mirror) = 0;
};

// The CPU kernels behind the KernelBackend interface (shared, stateless).
KernelBackend& CpuKernelBackend();

// What one forward/backward pass sees of the EST that runs it.
struct LayerContext {
  bool training = true;
  std::vector<Tensor>* buffers = nullptr;  // this EST's buffers, in model order
  PhiloxKey dropout_key;
  uint64_t* dropout_counter = nullptr;  // advanced by every Dropout call
  KernelBackend* kernels = nullptr;     // null: the CPU kernels
  KernelBackend& k() const { return kernels ? *kernels : CpuKernelBackend(); }
};

}  // namespace easyscale
