// Concat: the inputs (same dtype and rank, equal dimensions but `axis`) one
// after another along `axis`. Any dtype; each float input gets its part of the
// output's gradient.
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

class ConcatOp : public Op {
 public:
  // `widths[k]`: input k's dimension `axis` times the dimensions after it, the
  // length of its run in each of the `outer` blocks.
  ConcatOp(ValueInfo out, int64_t outer, std::vector<int64_t> widths)
      : out_(std::move(out)), outer_(outer), widths_(std::move(widths)) {
    for (int64_t w : widths_) out_width_ += w;
  }

  std::vector<ValueInfo> OutputInfos() const override { return {out_}; }
  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    if (out[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, ForwardOnDevice(ctx, in, *out[0]));
    for (int64_t o = 0; o < outer_; ++o) {
      int64_t at = o * out_width_;
      for (size_t k = 0; k < in.size(); ++k) {
        CopyRange(*in[k], o * widths_[k], out[0], at, widths_[k]);
        at += widths_[k];
      }
    }
  }
  bool HasGradient(size_t) const override { return out_.dtype == DType::kFloat32; }
  bool BackwardReadsInput(size_t) const override { return false; }
  bool BackwardReadsOutput(size_t) const override { return false; }
  void Backward(RunContext& ctx, const std::vector<const Value*>&, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (dout[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, BackwardOnDevice(ctx, *dout[0], din));
    for (int64_t o = 0; o < outer_; ++o) {
      int64_t at = o * out_width_;
      for (size_t k = 0; k < din.size(); ++k) {
        if (din[k] != nullptr) CopyRange(*dout[0], at, din[k], o * widths_[k], widths_[k]);
        at += widths_[k];
      }
    }
  }

  bool RunsOnDevice() const override { return true; }

 private:
#ifdef EASYSCALE_WITH_CUDA
  void ForwardOnDevice(RunContext& ctx, const std::vector<const Value*>& in, const Value& y) {
    int64_t at = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      CopyBlocksOnDevice(ctx, outer_, widths_[k], *in[k], widths_[k], 0, y, out_width_, at);
      at += widths_[k];
    }
  }
  void BackwardOnDevice(RunContext& ctx, const Value& dy, const std::vector<Value*>& din) {
    int64_t at = 0;
    for (size_t k = 0; k < din.size(); ++k) {
      if (din[k] != nullptr) {
        CopyBlocksOnDevice(ctx, outer_, widths_[k], dy, out_width_, at, *din[k], widths_[k], 0);
      }
      at += widths_[k];
    }
  }
#endif

  ValueInfo out_;
  int64_t outer_;
  std::vector<int64_t> widths_;
  int64_t out_width_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeConcat(const Node& node, int64_t,
                                         const std::vector<OpInput>& inputs) {
  if (inputs.empty()) return NodeError(node, "has no inputs");
  std::vector<const ValueInfo*> xs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    ES_ASSIGN_OR_RETURN(const ValueInfo* x, RequiredInput(node, inputs, k, "input"));
    xs.push_back(x);
  }
  if (node.attributes.count("axis") == 0) return NodeError(node, "attribute axis is missing");
  ES_ASSIGN_OR_RETURN(int64_t axis, node.Get<int64_t>("axis", 0));
  const int64_t rank = static_cast<int64_t>(xs[0]->shape.size());
  ES_ASSIGN_OR_RETURN(axis, NormalizeAxis(node, "attribute axis", axis, rank));
  ValueInfo out = *xs[0];
  out.shape[axis] = 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) outer *= out.shape[d];
    if (d > axis) inner *= out.shape[d];
  }
  std::vector<int64_t> widths;
  for (size_t k = 0; k < xs.size(); ++k) {
    bool fits = xs[k]->dtype == out.dtype && static_cast<int64_t>(xs[k]->shape.size()) == rank;
    for (int64_t d = 0; fits && d < rank; ++d) fits = d == axis || xs[k]->shape[d] == out.shape[d];
    if (!fits) {
      return NodeError(node, absl::StrCat("input ", k, " (", ToString(xs[k]->dtype), " ",
                                          ShapeString(xs[k]->shape), ") does not fit input 0 (",
                                          ToString(xs[0]->dtype), " ", ShapeString(xs[0]->shape),
                                          ") along axis ", axis));
    }
    out.shape[axis] += xs[k]->shape[axis];
    widths.push_back(xs[k]->shape[axis] * inner);
  }
  return std::make_unique<ConcatOp>(out, outer, widths);
}

}  // namespace easyscale::graph
