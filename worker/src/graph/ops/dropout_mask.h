// File: worker/src/graph/ops/dropout_mask.h
//
// A node's dropout (dropout.cc's scheme: the EST's own stream, the mask kept
// from the forward pass for the backward), shared by the nodes that drop
// their output: Dropout and Dropout+Add (dropout.cc), Softmax+Dropout
// (softmax.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/op.h"
#ifdef EASYSCALE_WITH_CUDA
#include "cuda_kernels.h"
#endif

namespace easyscale::graph {

struct DropoutSettings {
  float ratio = 0.5f;
  bool training_mode = true;
};

// A Dropout node's ratio and training_mode: its constant inputs 1 and 2 since
// opset 12 (absent: 0.5 and false, as ONNX), its ratio attribute before.
StatusOr<DropoutSettings> ReadDropoutSettings(const Node& node, int64_t opset,
                                              const std::vector<OpInput>& inputs);

class DropoutMask {
 public:
  explicit DropoutMask(DropoutSettings settings) : settings_(settings) {}

  // Starts a forward pass: it drops where RunContext.training and the node's
  // training_mode are both set (dropped()).
  void Start(const RunContext& ctx) {
    dropped_ = ctx.training && settings_.training_mode;
    if (!dropped_) kept_.clear();
  }
  // Whether the last forward pass dropped.
  bool dropped() const { return dropped_; }
  float ratio() const { return settings_.ratio; }

  // On the CPU, after Start said it drops: y = x dropped (plus residual where
  // given, cpu::Dropout), drawing n numbers from the EST's counter.
  void Forward(RunContext& ctx, size_t n, const float* x, const float* residual, float* y);
  // dx = dy times each element's scale as the last forward kept it.
  void Backward(size_t n, const float* dy, float* dx) const;
  // The last forward's flags (1 kept, 0 dropped) on the CPU.
  const std::vector<uint8_t>& kept() const { return kept_; }

#ifdef EASYSCALE_WITH_CUDA
  // On a device, after Start said it drops: the draw of n elements, and the
  // EST's counter advanced past them.
  cuda::DropoutDraw Draw(RunContext& ctx, size_t n) const;
  // The last device forward's flags, one byte an element.
  uint8_t* KeptOnDevice(RunContext& ctx, size_t n);
#endif

 private:
  // The EST's counter where n numbers are drawn, advanced past them.
  static uint64_t TakeCounter(RunContext& ctx, size_t n);

  DropoutSettings settings_;
  bool dropped_ = false;
  std::vector<uint8_t> kept_;
  DeviceMirror kept_dev_;
};

}  // namespace easyscale::graph
