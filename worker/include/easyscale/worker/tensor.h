// File: easyscale/worker/tensor.h
//
// A dense tensor in row-major (NCHW for images) order: its elements on the
// host and, when a device backend computes on it, a device mirror of them that
// the backend owns (KernelBackend::At, backend.h). Which copy is current is the
// caller's protocol (est_worker.cc documents the step's); a copied tensor is a
// host copy and starts without a mirror.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace easyscale {

// Device memory of one tensor, freed through the function its backend set
// (given the address and the size), so host code needs no device headers.
class DeviceMirror {
 public:
  using Release = void (*)(void* ptr, size_t bytes);
  DeviceMirror() = default;
  ~DeviceMirror() { Reset(); }
  DeviceMirror(const DeviceMirror&) noexcept {}
  DeviceMirror& operator=(const DeviceMirror& o) noexcept {
    if (this != &o) Reset();
    return *this;
  }
  DeviceMirror(DeviceMirror&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)),
        release_(std::exchange(o.release_, nullptr)) {}
  DeviceMirror& operator=(DeviceMirror&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(release_, o.release_);
    return *this;
  }

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void Adopt(void* ptr, size_t bytes, Release release) {
    Reset();
    ptr_ = ptr;
    bytes_ = bytes;
    release_ = release;
  }
  void Reset() {
    if (ptr_ != nullptr && release_ != nullptr) release_(ptr_, bytes_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Release release_ = nullptr;
};

template <typename T>
struct TensorOf {
  std::vector<int> shape;
  std::vector<T> data;
  mutable DeviceMirror mirror;

  TensorOf() = default;
  explicit TensorOf(std::vector<int> s) : shape(std::move(s)), data(NumElements(shape), T{}) {}

  static size_t NumElements(const std::vector<int>& s) {
    size_t n = 1;
    for (int d : s) n *= static_cast<size_t>(d);
    return n;
  }
  size_t size() const { return data.size(); }
  size_t bytes() const { return data.size() * sizeof(T); }
  int dim(int i) const { return shape[static_cast<size_t>(i)]; }
  T* ptr() { return data.data(); }
  const T* ptr() const { return data.data(); }
  // Reuses the allocation when the element count is unchanged.
  void Resize(std::vector<int> s) {
    shape = std::move(s);
    data.resize(NumElements(shape));
  }
  void Zero() { std::fill(data.begin(), data.end(), T{}); }
};

using Tensor = TensorOf<float>;
using IndexTensor = TensorOf<int32_t>;  // labels, argmax positions, flags
using FixedTensor = TensorOf<int64_t>;  // fixed-point sums (fixed_point.h)

}  // namespace easyscale
