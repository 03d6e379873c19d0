// File: easyscale/worker/backend.h
//
// What a model's passes run with. Parameters (and their gradients) are shared
// by all ESTs of a worker; per-EST state (BatchNorm running statistics, the
// dropout stream) lives in the EST and is bound through PassContext on every
// call, so switching EST costs a pointer swap.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "easyscale/worker/kernel_formulas.h"
#include "easyscale/worker/philox.h"
#include "easyscale/worker/tensor.h"

namespace easyscale {

struct Param {
  std::string name;  // the PyTorch state_dict key, the graph's initializer ("0.weight")
  Tensor value;
  Tensor grad;
};

// Where a worker's step runs: the CPU, or a device whose memory holds the
// step's tensors. A model's ops bring their own kernels for each (the graph
// runtime's ops, graph/op.h); the backend owns memory, queues (lanes) and the
// step's own kernels around the model: the loss, the fixed-point sums and the
// argmax, each the same bits on every backend (cpu_kernels.h documents their
// order). Kernels take addresses in the backend's memory (At): a tensor's host
// data on the CPU, its device mirror on a device, where work may run
// asynchronously until Download or Wait. A failing device throws
// std::runtime_error.
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
    CopyToHost(t.ptr(), t.bytes(), t.mirror, 0);
  }
  // Elements [first, first + count) of t, back to the host after queued work.
  template <typename T>
  void DownloadPart(TensorOf<T>& t, size_t first, size_t count) {
    CopyToHost(t.ptr() + first, count * sizeof(T), t.mirror, first * sizeof(T));
  }
  // Waits for queued work, throwing the device's error if it failed.
  virtual void Wait() = 0;

  // Whether tensors live in device memory (At is then a device address) and
  // work is queued on Stream(), the current lane's queue (a cudaStream_t).
  virtual bool OnDevice() const { return false; }
  virtual void* Stream() { return nullptr; }
  // The most device memory held at once, in bytes, as PyTorch's
  // max_memory_allocated counts it (not the CUDA context): the tensors' and
  // ops' buffers of every device backend in the process, plus the most that
  // stream-ordered scratch and CUDA graphs reserved on this one's device (each
  // at its own peak, so a bound from above). 0 on the CPU.
  virtual size_t PeakDeviceBytes() const { return 0; }
  // Where the kernels find `bytes` of elements whose host copy is `host` (the
  // mirror (re)allocated to that size on a device): At for untyped storage.
  void* Address(void* host, size_t bytes, DeviceMirror& mirror) {
    return AddressOf(host, bytes, mirror);
  }
  void UploadBytes(const void* host, size_t bytes, DeviceMirror& mirror) {
    CopyToDevice(host, bytes, mirror);
  }

  // Lanes: queues of work that may run at the same time (a device's streams).
  // After ForkLanes, calls go to the lane UseLane named last (lane 0 is where
  // everything else runs), each lane after the work queued before ForkLanes;
  // after JoinLanes, calls run after everything queued on every lane. A step
  // spreads its hosted ESTs over Lanes() lanes; 1 runs them one after another.
  // `lanes`: how many the fork's UseLane calls will name, so a device's kernels
  // can count on that many running side by side.
  virtual int Lanes() const { return 1; }
  virtual void ForkLanes(int lanes) { (void)lanes; }
  virtual void UseLane(int lane) { (void)lane; }
  virtual void JoinLanes() {}
  // The current lane's side queue: ForkSide returns it (a cudaStream_t) ordered
  // after the lane's work so far; after JoinSide the lane's work runs after
  // it. An op queues there what is independent of what it queues on Stream()
  // meanwhile (a weight's gradient beside the input's). Without one (or where
  // lanes already run side by side), Stream().
  virtual void* ForkSide() { return Stream(); }
  virtual void JoinSide() {}

  // Repeatable work: `pass` queues, on the current lane, the same work on the
  // same addresses whenever it comes with the same `key` and `addresses` (the
  // backend memory it touches, and whatever else fixes what it queues). A
  // device records the second such call (a CUDA graph) and replays the record
  // on later ones without calling `pass`, returning true: the caller then redoes
  // what `pass` does on the host. Values that change from call to call must be
  // read from backend memory. The CPU calls `pass` every time.
  virtual bool RunRepeatable(uint64_t key, std::span<const uintptr_t> addresses,
                             const std::function<void()>& pass) {
    (void)key;
    (void)addresses;
    pass();
    return false;
  }

  virtual void Copy(size_t bytes, const void* src, void* dst) = 0;
  virtual void Zero(size_t bytes, void* dst) = 0;
  // Writes the mean loss to loss[0] (backend memory) so a step need not wait.
  virtual void SoftmaxCrossEntropy(int rows, int classes, const float* logits,
                                   const int32_t* labels, float* dlogits, float* loss) = 0;
  // Folds gradient segments, laid end to end, into the fixed-point sums `acc`
  // (fixed_point.h); sets nonfinite[s] = 1 for a segment holding NaN or inf.
  // `segments` may hold several sources' segments of the same sizes, one
  // source after another (segments.size() a multiple of sizes.size()), all
  // folded into the same sums (exact integers: any order gives them);
  // nonfinite then holds each source's flags after the last's.
  virtual void AccumulateFixedPoint(std::span<const float* const> segments,
                                    std::span<const size_t> sizes, int64_t max_terms, int64_t* acc,
                                    int32_t* nonfinite) = 0;
  // dst[i] += src[i]: fixed-point sums of the same segments (exact, any order).
  virtual void AddFixedPointSums(size_t n, const int64_t* src, int64_t* dst) = 0;
  virtual void Argmax(int rows, int classes, const float* logits, int32_t* out) = 0;
  // The optimizer's update of each part's values from their mean gradients
  // (formulas::StepGradient: grad, or where rule.mean_of > 0 the means of
  // the fixed-point sums, which a backend may also write to grad): `rule`
  // (kernel_formulas.h) applied to each value and its state. Values are
  // independent, so a caller may split parameters into parts and parts into
  // calls; a device launches once for many parts.
  virtual void UpdateParams(const formulas::UpdateRule& rule,
                            std::span<const formulas::ParamPart> parts) = 0;

 protected:
  virtual void* AddressOf(void* host, size_t bytes, DeviceMirror& mirror) = 0;
  virtual void CopyToDevice(const void* host, size_t bytes, DeviceMirror& mirror) = 0;
  // `bytes` from `offset` bytes into the mirror, to `host`.
  virtual void CopyToHost(void* host, size_t bytes, DeviceMirror& mirror, size_t offset) = 0;
};

// The CPU backend (shared, stateless).
KernelBackend& CpuKernelBackend();

// Where a profiled pass's ops add their time: milliseconds by op type and
// direction ("Conv forward"), on the backend's clock (device events on a GPU).
using OpTimes = std::map<std::string, double>;

// What one forward/backward pass sees of the EST that runs it.
struct PassContext {
  bool training = true;
  std::vector<Tensor>* buffers = nullptr;  // this EST's buffers, in model order
  PhiloxKey dropout_key;
  uint64_t* dropout_counter = nullptr;  // advanced by every Dropout call
  KernelBackend* kernels = nullptr;     // null: the CPU kernels
  // On a device: *dropout_counter at the pass's start, in device memory, where
  // a replayed pass's Dropout kernels read it (null: they take the host value).
  const uint64_t* dropout_counter_slot = nullptr;
  OpTimes* op_times = nullptr;    // when set, each op's time is added there
  bool op_times_by_node = false;  // op_times keyed by node name instead of op type
};

}  // namespace easyscale
