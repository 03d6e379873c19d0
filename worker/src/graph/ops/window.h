// File: worker/src/graph/ops/window.h
//
// What Conv, MaxPool and AveragePool share: the sliding window's geometry
// (kernel_shape, strides, pads, dilations, auto_pad, ceil_mode) resolved for a 1-D or 2-D NC[H]W
// input. A 1-D input runs as a 2-D one of height 1, so the kernels only know 2-D.
//
//   ES_ASSIGN_OR_RETURN(Window w, ResolveWindow(node, x_shape, kernel, true));
//   // output rows oy read input rows oy*w.sh - w.pad_top + ky*w.dh, ky < w.kh
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "easyscale/common/checks.h"
#include "easyscale/worker/cpu_kernels.h"
#include "graph/op.h"
#include "graph/ops/node_checks.h"

namespace easyscale::graph {

struct Window {
  int64_t batch = 0, channels = 0;
  int spatial_rank = 2;  // 1 or 2
  int64_t h = 1, w = 1;  // input
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t oh = 1, ow = 1;  // output

  // [batch, out_channels, (oh,) ow].
  Shape OutputShape(int64_t out_channels) const {
    Shape s = {batch, out_channels};
    if (spatial_rank == 2) s.push_back(oh);
    s.push_back(ow);
    return s;
  }
  // The window over `image_channels` channels as the kernels take it.
  cpu::ConvGeometry Geometry(int64_t image_channels) const {
    const auto i = [](int64_t v) { return static_cast<int>(v); };
    return {i(image_channels), i(h),        i(w),  i(kh), i(kw), i(sh), i(sw),
            i(pad_top),        i(pad_left), i(dh), i(dw), i(oh), i(ow)};
  }
};

namespace window_internal {

// One spatial dimension: its output size and its begin and end pads.
inline Status ResolveDim(const Node& node, const std::string& auto_pad, bool ceil_mode, int64_t in,
                         int64_t k, int64_t s, int64_t d, int64_t* pad_begin, int64_t* pad_end,
                         int64_t* out) {
  const int64_t span = (k - 1) * d + 1;  // the dilated kernel's extent
  if (auto_pad == "VALID") {
    *pad_begin = *pad_end = 0;
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    *out = (in + s - 1) / s;
    const int64_t total = std::max<int64_t>(0, (*out - 1) * s + span - in);
    // SAME_UPPER puts the odd pad at the end, SAME_LOWER at the beginning.
    *pad_begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    *pad_end = total - *pad_begin;
    return absl::OkStatus();
  }
  const int64_t room = in + *pad_begin + *pad_end - span;
  if (room < 0) {
    return NodeError(
        node, absl::StrCat("the kernel (extent ", span, ") is larger than the padded input (",
                           in + *pad_begin + *pad_end, ")"));
  }
  *out = (ceil_mode ? (room + s - 1) / s : room / s) + 1;
  // A window that would start in the end padding is dropped (as PyTorch does).
  if (ceil_mode && (*out - 1) * s >= in + *pad_begin) --*out;
  return absl::OkStatus();
}

inline StatusOr<std::vector<int64_t>> Ints(const Node& node, const std::string& key, size_t n,
                                           int64_t fallback, int64_t min) {
  ES_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                      node.Get<std::vector<int64_t>>(key, std::vector<int64_t>(n, fallback)));
  if (v.size() != n) {
    return NodeError(node,
                     absl::StrCat("attribute ", key, " must have ", n, " values, not ", v.size()));
  }
  for (int64_t x : v) {
    if (x < min) return NodeError(node, absl::StrCat("attribute ", key, " must be >= ", min));
  }
  return v;
}

}  // namespace window_internal

// The window over input shape `x` (N, C, [H,] W) for a kernel of `kernel`
// (one extent per spatial dimension); ceil_mode is read only when `pooling`.
inline StatusOr<Window> ResolveWindow(const Node& node, const Shape& x,
                                      const std::vector<int64_t>& kernel, bool pooling) {
  using window_internal::Ints;
  if (x.size() != 3 && x.size() != 4) {
    return NodeError(
        node, absl::StrCat("input X must be 3-D or 4-D (N, C, [H,] W), not rank ", x.size()));
  }
  const size_t n = x.size() - 2;
  if (kernel.size() != n) {
    return NodeError(node,
                     absl::StrCat("kernel_shape must have ", n, " values, not ", kernel.size()));
  }
  for (int64_t k : kernel) {
    if (k < 1) return NodeError(node, "kernel_shape values must be >= 1");
  }
  ES_ASSIGN_OR_RETURN(std::vector<int64_t> strides, Ints(node, "strides", n, 1, 1));
  ES_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, Ints(node, "dilations", n, 1, 1));
  ES_ASSIGN_OR_RETURN(std::vector<int64_t> pads, Ints(node, "pads", 2 * n, 0, 0));
  ES_ASSIGN_OR_RETURN(std::string auto_pad, node.Get<std::string>("auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    return NodeError(node, "attribute auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  }
  if (auto_pad != "NOTSET" && node.attributes.count("pads") != 0) {
    return NodeError(node, "attributes auto_pad and pads exclude each other");
  }
  int64_t ceil_mode = 0;
  if (pooling) {
    ES_ASSIGN_OR_RETURN(ceil_mode, node.Get<int64_t>("ceil_mode", 0));
    if (ceil_mode != 0 && ceil_mode != 1)
      return NodeError(node, "attribute ceil_mode must be 0 or 1");
  }
  for (int64_t d : x) {
    if (d < 1) return NodeError(node, "input X has an empty dimension");
  }
  Window w;
  w.batch = x[0];
  w.channels = x[1];
  w.spatial_rank = static_cast<int>(n);
  // Dimension i of the n spatial ones; a 1-D input is the width.
  int64_t* in[2] = {&w.h, &w.w};
  int64_t* ks[2] = {&w.kh, &w.kw};
  int64_t* ss[2] = {&w.sh, &w.sw};
  int64_t* ds[2] = {&w.dh, &w.dw};
  int64_t* begin[2] = {&w.pad_top, &w.pad_left};
  int64_t* end[2] = {&w.pad_bottom, &w.pad_right};
  int64_t* out[2] = {&w.oh, &w.ow};
  for (size_t i = 0; i < n; ++i) {
    const size_t j = i + 2 - n;
    *in[j] = x[2 + i];
    *ks[j] = kernel[i];
    *ss[j] = strides[i];
    *ds[j] = dilations[i];
    *begin[j] = pads[i];
    *end[j] = pads[n + i];
    ES_RETURN_IF_ERROR(window_internal::ResolveDim(node, auto_pad, ceil_mode != 0, *in[j], *ks[j],
                                                   *ss[j], *ds[j], begin[j], end[j], out[j]));
  }
  return w;
}

// The window of a pooling node (AveragePool, MaxPool) over its input X, which
// must be float32; kernel_shape is required.
inline StatusOr<Window> ResolvePoolWindow(const Node& node, const std::vector<OpInput>& inputs) {
  ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "X", DType::kFloat32));
  if (node.attributes.count("kernel_shape") == 0) {
    return NodeError(node, "attribute kernel_shape is required");
  }
  ES_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                      node.Get<std::vector<int64_t>>("kernel_shape", {}));
  return ResolveWindow(node, inputs[0].info->shape, kernel, /*pooling=*/true);
}

}  // namespace easyscale::graph
