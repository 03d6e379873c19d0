// File: easyscale/worker/tensor.h
//
// A dense fp32 tensor in row-major (NCHW for images) order on the host.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace easyscale {

struct Tensor {
  std::vector<int> shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(std::vector<int> s) : shape(std::move(s)), data(NumElements(shape), 0.0f) {}

  static size_t NumElements(const std::vector<int>& s) {
    size_t n = 1;
    for (int d : s) n *= static_cast<size_t>(d);
    return n;
  }
  size_t size() const { return data.size(); }
  int dim(int i) const { return shape[static_cast<size_t>(i)]; }
  float* ptr() { return data.data(); }
  const float* ptr() const { return data.data(); }
  // Reuses the allocation when the element count is unchanged.
  void Resize(std::vector<int> s) {
    shape = std::move(s);
    data.resize(NumElements(shape));
  }
  void Zero() { std::fill(data.begin(), data.end(), 0.0f); }
};

}  // namespace easyscale
