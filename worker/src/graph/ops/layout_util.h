// File: worker/src/graph/ops/layout_util.h
//
// What the layout ops (Reshape, Transpose, Slice, Concat, ...) share: copying
// elements of any dtype, and the op whose output is its input's elements in
// the same order under another shape. Layout ops only move elements: no
// arithmetic, so their results are exact; a backward that could add two
// contributions to one element (Gather) says its order in its own file.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "easyscale/common/checks.h"
#include "graph/op.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {

// Row-major strides of `shape`, in elements.
inline std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// Calls f on the element vector of `v` that its dtype uses.
template <typename F>
void WithElements(const Value& v, F&& f) {
  if (v.dtype == DType::kFloat32) {
    f(v.floats);
  } else {
    f(v.ints);
  }
}

// dst's elements [dst_at, dst_at + n) = src's [src_at, src_at + n); same dtype.
inline void CopyRange(const Value& src, size_t src_at, Value* dst, size_t dst_at, size_t n) {
  if (src.dtype == DType::kFloat32) {
    std::copy_n(src.floats.begin() + src_at, n, dst->floats.begin() + dst_at);
  } else {
    std::copy_n(src.ints.begin() + src_at, n, dst->ints.begin() + dst_at);
  }
}

#ifdef EASYSCALE_WITH_CUDA
// On ctx's device, for o < outer: dst's elements [o * dst_width + dst_at,
// + width) = src's [o * src_width + src_at, + width) (CopyRange per block;
// same dtype).
inline void CopyBlocksOnDevice(RunContext& ctx, int64_t outer, int64_t width, const Value& src,
                               int64_t src_width, int64_t src_at, const Value& dst,
                               int64_t dst_width, int64_t dst_at) {
  if (outer == 0 || width == 0) return;
  const size_t e = src.dtype == DType::kFloat32 ? sizeof(float) : sizeof(int64_t);
  const char* from = DeviceData<const char>(ctx, src) + src_at * e;
  char* to = DeviceData<char>(ctx, dst) + dst_at * e;
  CheckLaunch(
      cudaMemcpy2DAsync(to, dst_width * e, from, src_width * e, width * e,
                        static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, StreamOf(ctx)),
      "block copy");
}
#endif

// Calls f(dst, src) for every element of a row-major tensor of `shape`, dst
// ascending, where src = offset + sum_d index[d] * strides[d]: a strided view
// of another tensor (a transpose, a slice).
template <typename F>
void ForEachStrided(const Shape& shape, int64_t offset, const std::vector<int64_t>& strides,
                    F&& f) {
  const int64_t n = NumElements(shape);
  if (n == 0) return;
  const size_t rank = shape.size();
  std::vector<int64_t> index(rank, 0);
  int64_t src = offset;
  for (int64_t dst = 0; dst < n; ++dst) {
    f(dst, src);
    for (size_t d = rank; d-- > 0;) {  // odometer step, last dimension fastest
      src += strides[d];
      if (++index[d] < shape[d]) break;
      src -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

// An op whose output is a strided view of input 0 (Transpose, Slice): every
// output element reads one input element and no two read the same one, so
// the backward pass writes each gradient element at most once.
class StridedViewOp : public Op {
 public:
  StridedViewOp(DType dtype, Shape out_shape, int64_t offset, std::vector<int64_t> strides)
      : dtype_(dtype),
        out_shape_(std::move(out_shape)),
        offset_(offset),
        strides_(std::move(strides)) {}

  std::vector<ValueInfo> OutputInfos() const override { return {{dtype_, out_shape_}}; }
  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    if (out[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, CopyOnDevice(ctx, *in[0], *out[0], /*scatter=*/false));
    if (dtype_ == DType::kFloat32) {
      ForEachStrided(out_shape_, offset_, strides_,
                     [&](int64_t dst, int64_t src) { out[0]->floats[dst] = in[0]->floats[src]; });
    } else {
      ForEachStrided(out_shape_, offset_, strides_,
                     [&](int64_t dst, int64_t src) { out[0]->ints[dst] = in[0]->ints[src]; });
    }
  }
  bool HasGradient(size_t i) const override { return i == 0 && dtype_ == DType::kFloat32; }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t) const override { return false; }
  void Backward(RunContext& ctx, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (din[0] == nullptr || dout[0] == nullptr) return;
    // The elements no output reads keep their zeros.
    ES_RUN_ON_DEVICE(ctx, CopyOnDevice(ctx, *dout[0], *din[0], /*scatter=*/true));
    ForEachStrided(out_shape_, offset_, strides_,
                   [&](int64_t dst, int64_t src) { din[0]->floats[src] = dout[0]->floats[dst]; });
  }

  bool RunsOnDevice() const override { return out_shape_.size() <= kMaxDeviceRank; }
  bool Recomputable() const override { return true; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  void CopyOnDevice(RunContext& ctx, const Value& src, Value& dst, bool scatter) {
    const size_t element = dtype_ == DType::kFloat32 ? sizeof(float) : sizeof(int64_t);
    CheckLaunch(cuda_ops::StridedCopy(DeviceView(out_shape_, strides_), offset_, element, scatter,
                                      DeviceData<void>(ctx, src), DeviceData<void>(ctx, dst),
                                      StreamOf(ctx)),
                "strided view");
  }
#endif

  DType dtype_;
  Shape out_shape_;
  int64_t offset_;
  std::vector<int64_t> strides_;
};

// An op whose output is input 0's elements in the same row-major order under
// another shape (Identity, Flatten, Reshape, Squeeze, Unsqueeze). Other inputs
// only configure it. Backward copies the gradient back.
class SameOrderOp : public Op {
 public:
  SameOrderOp(DType dtype, Shape out_shape) : dtype_(dtype), out_shape_(std::move(out_shape)) {}

  std::vector<ValueInfo> OutputInfos() const override { return {{dtype_, out_shape_}}; }
  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    if (out[0] == nullptr) return;
    if (ctx.device != nullptr) return Copy(ctx, *in[0], out[0]);
    CopyRange(*in[0], 0, out[0], 0, in[0]->size());
  }
  bool HasGradient(size_t i) const override { return i == 0 && dtype_ == DType::kFloat32; }
  // The same elements in the same order: the runtime hands the gradient on.
  std::optional<size_t> GradientOfOutput(size_t i) const override {
    return i == 0 ? std::optional<size_t>(0) : std::nullopt;
  }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t) const override { return false; }
  void Backward(RunContext& ctx, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (din[0] == nullptr || dout[0] == nullptr) return;
    if (ctx.device != nullptr) return Copy(ctx, *dout[0], din[0]);
    din[0]->floats = dout[0]->floats;
  }
  bool RunsOnDevice() const override { return true; }
  bool Recomputable() const override { return true; }

 private:
  static void Copy(RunContext& ctx, const Value& from, Value* to) {
    ctx.device->Copy(from.bytes(), DeviceData<void>(ctx, from), DeviceData<void>(ctx, *to));
  }

  DType dtype_;
  Shape out_shape_;
};

}  // namespace easyscale::graph
