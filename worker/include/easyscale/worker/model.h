// File: easyscale/worker/model.h
//
// A sequential model of layers over [B, C, H, W] images with `classes` logits.
//   auto model = BuildModel("cnn", {1, 28, 28}, 10);
//   (*model)->InitParams(seed);
//   const Tensor& logits = (*model)->Forward(x, ctx);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/worker/layers.h"

namespace easyscale {

class Model {
 public:
  Model(std::vector<std::unique_ptr<Layer>> layers, std::vector<int> input_chw, int classes);

  // Kaiming-uniform weights from Philox streams keyed by (seed, parameter index).
  void InitParams(uint64_t seed);
  const Tensor& Forward(const Tensor& x, LayerContext& ctx);
  void Backward(const Tensor& dlogits, LayerContext& ctx);

  const std::vector<Param*>& params() const { return params_; }
  size_t NumParamValues() const;
  // Fresh per-EST buffers, in the order LayerContext::buffers expects.
  std::vector<Tensor> InitialBuffers() const;
  const std::vector<int>& input_chw() const { return input_chw_; }
  int classes() const { return classes_; }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Param*> params_;
  std::vector<int> input_chw_;
  int classes_;
  std::vector<Tensor> acts_;   // acts_[i] = output of layer i
  std::vector<Tensor> grads_;  // grads_[i] = gradient w.r.t. the input of layer i+1
  const Tensor* input_ = nullptr;
  size_t first_trainable_ = 0;
};

// "mlp": avgpool2 - flatten - linear(196,128) - relu - dropout(0.1) - linear(128,classes)
// "cnn": conv5(8) - bn - relu - maxpool2 - conv5(16) - bn - relu - maxpool2 - flatten -
//        dropout(0.25) - linear(256,64) - relu - linear(64,classes)
StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name, std::vector<int> input_chw,
                                            int classes);

}  // namespace easyscale
