// File: worker/src/graph/ops/device_op.h
//
// What the ops' device halves share (builds with CUDA only): the pass's
// stream, launch checks, and scratch memory on the pass's device.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda_kernels.h"
#include "device_buffer.h"
#include "easyscale/common/checks.h"
#include "graph/op.h"
#include "graph/ops/broadcast.h"
#include "graph/ops/cuda_ops.h"

namespace easyscale::graph {

inline cudaStream_t StreamOf(RunContext& ctx) {
  return static_cast<cudaStream_t>(ctx.device->Stream());
}

// An op's two independent gradients side by side: weight(stream) queues the
// weight's (when `weight_wanted`) on the lane's side stream where the input's
// is wanted too, else on the pass's; input() queues the input's on
// StreamOf(ctx); what the pass queues next runs after both.
template <typename Weight, typename Input>
void WeightBesideInput(RunContext& ctx, bool weight_wanted, bool input_wanted, Weight&& weight,
                       Input&& input) {
  const bool both = weight_wanted && input_wanted;
  if (weight_wanted)
    weight(both ? static_cast<cudaStream_t>(ctx.device->ForkSide()) : StreamOf(ctx));
  if (input_wanted) input();
  if (both) ctx.device->JoinSide();
}

// Throws CudaError naming the op's step when a launch failed (the device
// backend turns it into the step's error).
inline void CheckLaunch(cudaError_t err, const char* what) { cuda::ThrowIfError(err, what); }

// n floats of an op's scratch in the pass's device memory, kept in `m` from
// pass to pass.
inline float* DeviceScratch(RunContext& ctx, DeviceMirror& m, size_t n) {
  return static_cast<float*>(ctx.device->Address(nullptr, n * sizeof(float), m));
}

// n floats of transient scratch: slot `slot` of the pass's workspace, valid
// until the op's call returns (the next op may take it). A slot only grows, to
// the largest request of the program's first pass, so a recorded pass's
// addresses stay.
inline float* TransientScratch(RunContext& ctx, int slot, size_t n) {
  ES_CHECK(ctx.workspace != nullptr && slot >= 0 && slot < DeviceWorkspace::kSlots)
      << "transient scratch needs the pass's workspace";
  DeviceMirror& m = ctx.workspace->slots[slot];
  if (m.bytes() < n * sizeof(float)) ctx.device->Address(nullptr, n * sizeof(float), m);
  return static_cast<float*>(m.get());
}

static_assert(cuda_ops::kMaxRank == kMaxDeviceRank);

// A broadcast as the kernels take it (rank at most kMaxDeviceRank).
inline cuda_ops::BroadcastDims DeviceDims(const Broadcast& bc) {
  cuda_ops::BroadcastDims d;
  d.rank = static_cast<int>(bc.out.size());
  for (size_t i = 0; i < bc.out.size(); ++i) {
    d.out[i] = bc.out[i];
    d.steps[0][i] = bc.a_steps[i];
    d.steps[1][i] = bc.b_steps[i];
  }
  return d;
}

// A strided view (layout_util.h's ForEachStrided) as the kernels take it:
// the view's shape and its strides in steps[0].
inline cuda_ops::BroadcastDims DeviceView(const Shape& shape, const std::vector<int64_t>& strides) {
  cuda_ops::BroadcastDims d;
  d.rank = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    d.out[i] = shape[i];
    d.steps[0][i] = strides[i];
  }
  return d;
}

}  // namespace easyscale::graph
