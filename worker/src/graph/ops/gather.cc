// Gather: out[o, p..., i] = data[o, indices[p...], i] along `axis` (o the
// dimensions before it, i those after); negative indices count from the end.
// Any dtype for data; indices int64, checked against the axis at run time.
//
// Backward (float data): the gradient of data is a scatter-add of the
// output's gradient. Order: one pass, o ascending, then index positions p
// ascending, then i; so each data element gets its contributions added in
// ascending index-position order, starting from 0, on any machine (a
// device gathers them per data element in that order: gather.cu). On a
// device, float data only, and an index out of range reads 0 and adds
// nowhere where the CPU stops the worker.
#include "graph/ops/layout_util.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"
#ifdef EASYSCALE_WITH_CUDA
#include "graph/ops/device_op.h"
#endif

namespace easyscale::graph {
namespace {

class GatherOp : public Op {
 public:
  GatherOp(ValueInfo out, int64_t outer, int64_t axis_dim, int64_t positions, int64_t inner)
      : out_(std::move(out)),
        outer_(outer),
        axis_dim_(axis_dim),
        positions_(positions),
        inner_(inner) {}

  std::vector<ValueInfo> OutputInfos() const override { return {out_}; }
  void Forward(RunContext& ctx, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    if (out[0] == nullptr) return;
    ES_RUN_ON_DEVICE(ctx, CheckLaunch(cuda_ops::GatherForward(
                                          Outer(), AxisDim(), Positions(), Inner(),
                                          DeviceData(ctx, *in[0]), DeviceData<int64_t>(ctx, *in[1]),
                                          DeviceData(ctx, *out[0]), StreamOf(ctx)),
                                      "Gather"));
    for (int64_t o = 0; o < outer_; ++o) {
      for (int64_t p = 0; p < positions_; ++p) {
        CopyRange(*in[0], (o * axis_dim_ + Index(*in[1], p)) * inner_, out[0],
                  (o * positions_ + p) * inner_, inner_);
      }
    }
  }
  bool HasGradient(size_t i) const override { return i == 0 && out_.dtype == DType::kFloat32; }
  bool BackwardReadsInput(size_t i) const override { return i == 1; }
  bool BackwardReadsOutput(size_t) const override { return false; }
  void Backward(RunContext& ctx, const std::vector<const Value*>& in,
                const std::vector<const Value*>&, const std::vector<const Value*>& dout,
                const std::vector<Value*>& din) override {
    if (din[0] == nullptr || dout[0] == nullptr) return;
    ES_RUN_ON_DEVICE(
        ctx,
        CheckLaunch(cuda_ops::GatherBackward(
                        Outer(), AxisDim(), Positions(), Inner(), DeviceData(ctx, *dout[0]),
                        DeviceData<int64_t>(ctx, *in[1]), DeviceData(ctx, *din[0]), StreamOf(ctx)),
                    "Gather gradient"));
    std::vector<float>& dx = din[0]->floats;
    const std::vector<float>& dy = dout[0]->floats;
    for (int64_t o = 0; o < outer_; ++o) {
      for (int64_t p = 0; p < positions_; ++p) {
        const int64_t src = (o * axis_dim_ + Index(*in[1], p)) * inner_;
        const int64_t dst = (o * positions_ + p) * inner_;
        for (int64_t i = 0; i < inner_; ++i) dx[src + i] += dy[dst + i];
      }
    }
  }

  // Float data (an embedding table); on a device an index out of range
  // reads 0 and adds nowhere instead of stopping the worker.
  bool RunsOnDevice() const override { return out_.dtype == DType::kFloat32; }

 private:
  size_t Outer() const { return static_cast<size_t>(outer_); }
  size_t AxisDim() const { return static_cast<size_t>(axis_dim_); }
  size_t Positions() const { return static_cast<size_t>(positions_); }
  size_t Inner() const { return static_cast<size_t>(inner_); }

  int64_t Index(const Value& indices, int64_t p) const {
    const int64_t k = indices.ints[p];
    ES_CHECK(k >= -axis_dim_ && k < axis_dim_)
        << "Gather: index " << k << " is out of range for an axis of " << axis_dim_;
    return k < 0 ? k + axis_dim_ : k;
  }

  ValueInfo out_;
  int64_t outer_, axis_dim_, positions_, inner_;
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeGather(const Node& node, int64_t,
                                         const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* data, RequiredInput(node, inputs, 0, "data"));
  ES_ASSIGN_OR_RETURN(const ValueInfo* indices, RequiredInput(node, inputs, 1, "indices"));
  if (indices->dtype != DType::kInt64) {
    return NodeError(node,
                     absl::StrCat("indices input is ", ToString(indices->dtype), ", not int64"));
  }
  const int64_t rank = static_cast<int64_t>(data->shape.size());
  ES_ASSIGN_OR_RETURN(int64_t axis, node.Get<int64_t>("axis", 0));
  ES_ASSIGN_OR_RETURN(axis, NormalizeAxis(node, "attribute axis", axis, rank));
  if (inputs[1].constant != nullptr) {  // known now: say which node is wrong
    for (int64_t k : inputs[1].constant->ints) {
      if (k < -data->shape[axis] || k >= data->shape[axis]) {
        return NodeError(node, absl::StrCat("indices input has ", k, ", out of range for axis ",
                                            axis, " of size ", data->shape[axis]));
      }
    }
  }
  ValueInfo out = {data->dtype, {}};
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == axis) {
      out.shape.insert(out.shape.end(), indices->shape.begin(), indices->shape.end());
      continue;
    }
    out.shape.push_back(data->shape[d]);
    (d < axis ? outer : inner) *= data->shape[d];
  }
  return std::make_unique<GatherOp>(out, outer, data->shape[axis], NumElements(indices->shape),
                                    inner);
}

}  // namespace easyscale::graph
