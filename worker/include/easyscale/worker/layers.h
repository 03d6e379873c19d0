// File: easyscale/worker/layers.h
//
// Layers of the runtime. Parameters (and their gradients) are shared by all
// ESTs of a worker; per-EST state (BatchNorm running statistics, the dropout
// stream) lives in the EST and is bound through LayerContext on every call, so
// switching EST costs a pointer swap.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "easyscale/worker/philox.h"
#include "easyscale/worker/tensor.h"

namespace easyscale {

struct Param {
  std::string name;
  Tensor value;
  Tensor grad;
  int fan_in = 1;  // for initialisation
  bool is_bias = false;
  float init_constant = 0.0f;  // used when fan_in == 0 (BatchNorm gamma/beta)
};

// What one forward/backward pass sees of the EST that runs it.
struct LayerContext {
  bool training = true;
  std::vector<Tensor>* buffers = nullptr;  // this EST's buffers, in model order
  PhiloxKey dropout_key;
  uint64_t* dropout_counter = nullptr;  // advanced by every Dropout call
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string Name() const = 0;
  // Output shape for an input shape; validates the input.
  virtual std::vector<int> OutputShape(const std::vector<int>& in) const = 0;
  virtual void Forward(const Tensor& x, Tensor* y, LayerContext& ctx) = 0;
  // Sets (not adds to) the parameter gradients; dx may be null for the first layer.
  virtual void Backward(const Tensor& dy, Tensor* dx, LayerContext& ctx) = 0;
  virtual std::vector<Param*> Params() { return {}; }
  // Per-EST buffers this layer owns: their initial values.
  virtual std::vector<Tensor> InitialBuffers() const { return {}; }
  // Index of this layer's first buffer in LayerContext::buffers.
  void set_buffer_offset(size_t offset) { buffer_offset_ = offset; }

 protected:
  size_t buffer_offset_ = 0;
};

std::unique_ptr<Layer> MakeConv2d(int in_channels, int out_channels, int kernel);
std::unique_ptr<Layer> MakeLinear(int in_features, int out_features);
std::unique_ptr<Layer> MakeBatchNorm2d(int channels);
std::unique_ptr<Layer> MakeRelu();
std::unique_ptr<Layer> MakeMaxPool2();
std::unique_ptr<Layer> MakeAvgPool2();
std::unique_ptr<Layer> MakeDropout(float p);
std::unique_ptr<Layer> MakeFlatten();

}  // namespace easyscale
