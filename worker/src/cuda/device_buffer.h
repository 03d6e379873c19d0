// File: worker/src/cuda/device_buffer.h
//
// A move-only owner of device memory (plain cudaMalloc, never managed memory),
// with copies to and from host vectors. Errors throw CudaError naming the call,
// so a failed copy is never mistaken for data.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace easyscale::cuda {

class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& what, cudaError_t err)
      : std::runtime_error(what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                           ")"),
        code_(err) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

inline void ThrowIfError(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess) throw CudaError(what, err);
}

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) { Resize(n); }
  explicit DeviceBuffer(const std::vector<T>& host) { Upload(host); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Reallocates only when the element count changes; contents are undefined after.
  void Resize(size_t n) {
    if (n == size_) return;
    ThrowIfError(cudaFree(ptr_), "cudaFree");
    ptr_ = nullptr;
    size_ = 0;
    if (n == 0) return;
    ThrowIfError(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)), "cudaMalloc");
    size_ = n;
  }
  void Upload(const std::vector<T>& host) {
    Resize(host.size());
    if (size_ == 0) return;
    ThrowIfError(cudaMemcpy(ptr_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice),
                 "cudaMemcpy to device");
  }
  std::vector<T> Download() const {
    std::vector<T> host(size_);
    if (size_ == 0) return host;
    ThrowIfError(cudaMemcpy(host.data(), ptr_, size_ * sizeof(T), cudaMemcpyDeviceToHost),
                 "cudaMemcpy to host");
    return host;
  }
  // Fills every byte with `byte` (tests poison outputs so unwritten ones show).
  void Fill(int byte) {
    if (size_ > 0) ThrowIfError(cudaMemset(ptr_, byte, size_ * sizeof(T)), "cudaMemset");
  }

  T* get() { return ptr_; }
  const T* get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  T* ptr_ = nullptr;
  size_t size_ = 0;
};

// Makes GPU `ordinal` modulo the device count current for this thread (a pod
// sees only its own GPU; local workers spread over the machine's) and returns it.
inline int SelectDevice(int ordinal) {
  int n = 0;
  ThrowIfError(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  const int device = n > 0 ? (ordinal % n + n) % n : 0;
  ThrowIfError(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

// How many CUDA devices are usable; 0 (and why in *reason) when none or no driver.
inline int UsableDeviceCount(std::string* reason) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (reason) *reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  if (n == 0 && reason) *reason = "no CUDA device";
  return n;
}

}  // namespace easyscale::cuda
