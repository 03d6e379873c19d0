// Split: input's consecutive parts along `axis`, one per output, of the sizes
// `split` gives (an input known at load time since opset 13, an attribute
// before); without it, num_outputs (opset 18) parts of ceil(dim / n) with a
// smaller last one, or equal parts. Any dtype; the float input's gradient is
// the outputs' gradients side by side (zeros where an output has none).
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

class SplitOp : public Op {
 public:
  // `widths[k]`: output k's dimension `axis` times the dimensions after it.
  SplitOp(std::vector<ValueInfo> outs, int64_t outer, std::vector<int64_t> widths)
      : outs_(std::move(outs)), outer_(outer), widths_(std::move(widths)) {
    for (int64_t w : widths_) in_width_ += w;
  }

  std::vector<ValueInfo> OutputInfos() const override { return outs_; }
  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, *in[0], out));
    for (int64_t o = 0; o < outer_; ++o) {
      int64_t at = o * in_width_;
      for (size_t k = 0; k < out.size(); ++k) {
        if (out[k] != nullptr) CopyRange(*in[0], at, out[k], o * widths_[k], widths_[k]);
        at += widths_[k];
      }
    }
  }
  bool HasGradient(size_t i) const override { return i == 0 && outs_[0].dtype == DType::kFloat32; }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t) const override { return false; }
  void Backward(RunContext& ctx, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (din[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, dout, *din[0]));
    for (int64_t o = 0; o < outer_; ++o) {
      int64_t at = o * in_width_;
      for (size_t k = 0; k < dout.size(); ++k) {
        if (dout[k] != nullptr) CopyRange(*dout[k], o * widths_[k], din[0], at, widths_[k]);
        at += widths_[k];
      }
    }
  }

  bool RunsOnDevice() const override { return true; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  void ForwardOnDevice(RunContext& ctx, const Value& x, const std::vector<Value*>& out) {
    int64_t at = 0;
    for (size_t k = 0; k < out.size(); ++k) {
      if (out[k] != nullptr) {
        CopyBlocksOnDevice(ctx, outer_, widths_[k], x, in_width_, at, *out[k], widths_[k], 0);
      }
      at += widths_[k];
    }
  }
  // The parts without a gradient keep their zeros.
  void BackwardOnDevice(RunContext& ctx, const std::vector<const Value*>& dout, const Value& dx) {
    int64_t at = 0;
    for (size_t k = 0; k < dout.size(); ++k) {
      if (dout[k] != nullptr) {
        CopyBlocksOnDevice(ctx, outer_, widths_[k], *dout[k], widths_[k], 0, dx, in_width_, at);
      }
      at += widths_[k];
    }
  }
#endif

  std::vector<ValueInfo> outs_;
  int64_t outer_;
  std::vector<int64_t> widths_;
  int64_t in_width_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeSplit(const Node& node, int64_t opset,
                                        const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, 0, "input"));
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  ES_ASSIGN_OR_RETURN(int64_t axis, node.Get<int64_t>("axis", 0));
  ES_ASSIGN_OR_RETURN(axis, NormalizeAxis(node, "attribute axis", axis, rank));
  const int64_t dim = x->shape[axis];
  const int64_t n = static_cast<int64_t>(node.outputs.size());
  if (n == 0) return NodeError(node, "has no outputs");

  ES_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                      IntsAttributeOrInput(node, opset, inputs, 1, "split"));
  ES_ASSIGN_OR_RETURN(const int64_t num_outputs, node.Get<int64_t>("num_outputs", 0));
  if (!sizes.empty()) {
    if (num_outputs != 0) return NodeError(node, "has both split and attribute num_outputs");
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) return NodeError(node, absl::StrCat("split has a negative size ", s));
      total += s;
    }
    if (static_cast<int64_t>(sizes.size()) != n || total != dim) {
      return NodeError(
          node, absl::StrCat("split sizes ", ShapeString(sizes), " do not split ", "dimension ",
                             axis, " of size ", dim, " into ", n, " outputs"));
    }
  } else if (num_outputs != 0) {
    if (num_outputs != n || (n - 1) * ((dim + n - 1) / n) >= dim) {
      return NodeError(node, absl::StrCat("attribute num_outputs ", num_outputs, " does not fit ",
                                          n, " outputs and dimension ", axis, " of size ", dim));
    }
    const int64_t part = (dim + n - 1) / n;
    for (int64_t k = 0; k < n; ++k) sizes.push_back(std::min(part, dim - k * part));
  } else {
    if (opset >= 18) return NodeError(node, "needs split or attribute num_outputs");
    if (dim % n != 0) {
      return NodeError(node, absl::StrCat("dimension ", axis, " of size ", dim,
                                          " does not split equally into ", n, " outputs"));
    }
    sizes.assign(n, dim / n);
  }

  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= x->shape[d];
    if (d > axis) inner *= x->shape[d];
  }
  std::vector<ValueInfo> outs;
  std::vector<int64_t> widths;
  for (int64_t s : sizes) {
    outs.push_back(*x);
    outs.back().shape[axis] = s;
    widths.push_back(s * inner);
  }
  return std::make_unique<SplitOp>(outs, outer, widths);
}

}  // namespace easyscale::graph
