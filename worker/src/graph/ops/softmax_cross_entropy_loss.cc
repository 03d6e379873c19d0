// SoftmaxCrossEntropyLoss: scores [N, C] or [N, C, d1, ...], labels [N] or
// [N, d1, ...] (int64), optional weights [C]. For each position r (n, then
// d1... ascending), over its row z of C classes:
//   m = max_c z_c (c ascending), e_c = Exp(z_c - m), s = sum_c e_c (c
//   ascending, from 0), lse = Log(s), loss_r = lse - (z_label - m),
//   prob_c = e_c * (1 / s), log_prob_c = (z_c - m) - lse
// (formulas::SoftmaxCrossEntropyRow's order), times weights[label] when
// weights are given; 0 where label == ignore_index. Reductions: none gives
// loss_r; sum adds the non-ignored loss_r in ascending r from 0; mean is that
// sum times 1 / denominator, the denominator being the count of non-ignored
// positions, or the sum of their weights[label] in ascending r from 0.
//
// Backward to scores: dz_c = (prob_c - [c == label]) * g_r with g_r = dloss_r
// (none), dloss (sum) or dloss * (1 / denominator) (mean), times
// weights[label] when given; plus, if log_prob has a gradient dlp,
// dlp_c - prob_c * S with S = sum_c dlp_c (c ascending). With dloss = 1, mean
// and no weights this is the built-in models' cpu::SoftmaxCrossEntropy, bit
// for bit.
#include "easyscale/worker/detmath.h"
#include "graph/ops/node_checks.h"
#include "graph/ops/ops.h"

namespace easyscale::graph {
namespace {

enum class Reduction { kNone, kSum, kMean };

class SoftmaxCrossEntropyLossOp : public Op {
 public:
  SoftmaxCrossEntropyLossOp(Shape scores, Reduction reduction, bool has_ignore, int64_t ignore)
      : scores_(std::move(scores)),
        reduction_(reduction),
        has_ignore_(has_ignore),
        ignore_(ignore) {
    n_ = scores_[0];
    c_ = scores_[1];
    d_ = 1;
    for (size_t k = 2; k < scores_.size(); ++k) d_ *= scores_[k];
  }

  std::vector<ValueInfo> OutputInfos() const override {
    Shape loss;
    if (reduction_ == Reduction::kNone) {
      loss = scores_;
      loss.erase(loss.begin() + 1);
    }
    return {{DType::kFloat32, loss}, {DType::kFloat32, scores_}};
  }

  void Forward(RunContext&, const std::vector<const Value*>& in,
               const std::vector<Value*>& out) override {
    const std::vector<float>& z = in[0]->floats;
    const std::vector<int64_t>& labels = in[1]->ints;
    const Value* weights = in.size() > 2 ? in[2] : nullptr;
    Value* log_prob = out.size() > 1 ? out[1] : nullptr;
    const int64_t rows = n_ * d_;
    probs_.assign(static_cast<size_t>(rows * c_), 0.0f);
    std::vector<float> losses(rows, 0.0f);
    float total = 0.0f, denominator = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      // Element (n, c, j) of scores, with r = n * d + j.
      const int64_t base = (r / d_) * c_ * d_ + r % d_;
      float m = z[base];
      for (int64_t c = 1; c < c_; ++c) m = z[base + c * d_] > m ? z[base + c * d_] : m;
      float* prob = &probs_[r * c_];
      float sum = 0.0f;
      for (int64_t c = 0; c < c_; ++c) {
        prob[c] = detmath::Exp(z[base + c * d_] - m);
        sum += prob[c];
      }
      const float inv_sum = 1.0f / sum;
      const float lse = detmath::Log(sum);
      for (int64_t c = 0; c < c_; ++c) prob[c] = prob[c] * inv_sum;
      if (log_prob != nullptr) {
        for (int64_t c = 0; c < c_; ++c)
          log_prob->floats[base + c * d_] = (z[base + c * d_] - m) - lse;
      }
      if (Ignored(labels[r])) continue;
      const int64_t label = Label(labels[r]);
      float loss = lse - (z[base + label * d_] - m);
      if (weights != nullptr) {
        loss = loss * weights->floats[label];
        denominator += weights->floats[label];
      } else {
        denominator += 1.0f;
      }
      losses[r] = loss;
      total += loss;
    }
    inv_denominator_ = 1.0f / denominator;
    if (out[0] == nullptr) return;
    if (reduction_ == Reduction::kNone) {
      out[0]->floats = std::move(losses);
    } else {
      out[0]->floats[0] = reduction_ == Reduction::kSum ? total : total * inv_denominator_;
    }
  }

  bool HasGradient(size_t i) const override { return i == 0; }

  void Backward(RunContext&, const std::vector<const Value*>& in, const std::vector<const Value*>&,
                const std::vector<const Value*>& dout, const std::vector<Value*>& din) override {
    if (din[0] == nullptr) return;
    const std::vector<int64_t>& labels = in[1]->ints;
    const Value* weights = in.size() > 2 ? in[2] : nullptr;
    const Value* dloss = dout[0];
    const Value* dlog_prob = dout.size() > 1 ? dout[1] : nullptr;
    std::vector<float>& dz = din[0]->floats;
    const int64_t rows = n_ * d_;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t base = (r / d_) * c_ * d_ + r % d_;
      const float* prob = &probs_[r * c_];
      if (dloss != nullptr && !Ignored(labels[r])) {
        const int64_t label = Label(labels[r]);
        float g = reduction_ == Reduction::kNone ? dloss->floats[r] : dloss->floats[0];
        if (reduction_ == Reduction::kMean) g = g * inv_denominator_;
        if (weights != nullptr) g = g * weights->floats[label];
        for (int64_t c = 0; c < c_; ++c) {
          dz[base + c * d_] = (prob[c] - (c == label ? 1.0f : 0.0f)) * g;
        }
      }
      if (dlog_prob != nullptr) {
        const std::vector<float>& dlp = dlog_prob->floats;
        float s = 0.0f;
        for (int64_t c = 0; c < c_; ++c) s += dlp[base + c * d_];
        for (int64_t c = 0; c < c_; ++c) {
          dz[base + c * d_] += dlp[base + c * d_] - prob[c] * s;
        }
      }
    }
  }

 private:
  bool Ignored(int64_t label) const { return has_ignore_ && label == ignore_; }
  int64_t Label(int64_t label) const {
    ES_CHECK(label >= 0 && label < c_)
        << "SoftmaxCrossEntropyLoss: label " << label << " is not a class of " << c_;
    return label;
  }

  Shape scores_;
  Reduction reduction_;
  bool has_ignore_;
  int64_t ignore_;
  int64_t n_, c_, d_;
  std::vector<float> probs_;  // the last forward's softmax, row r at r * C
  float inv_denominator_ = 1.0f;
};

}  // namespace

StatusOr<std::unique_ptr<Op>> MakeSoftmaxCrossEntropyLoss(const Node& node, int64_t,
                                                          const std::vector<OpInput>& inputs) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* scores, RequiredInput(node, inputs, 0, "scores"));
  ES_ASSIGN_OR_RETURN(const ValueInfo* labels, RequiredInput(node, inputs, 1, "labels"));
  if (scores->dtype != DType::kFloat32 || scores->shape.size() < 2) {
    return NodeError(node, absl::StrCat("scores input must be float32 [N, C, ...], not ",
                                        ToString(scores->dtype), " ", ShapeString(scores->shape)));
  }
  Shape want = scores->shape;
  want.erase(want.begin() + 1);
  if (labels->dtype != DType::kInt64 || labels->shape != want) {
    return NodeError(node, absl::StrCat("labels input must be int64 ", ShapeString(want),
                                        " for scores ", ShapeString(scores->shape), ", not ",
                                        ToString(labels->dtype), " ", ShapeString(labels->shape)));
  }
  if (HasInput(inputs, 2)) {
    const ValueInfo* w = inputs[2].info;
    if (w->dtype != DType::kFloat32 || w->shape != Shape{scores->shape[1]}) {
      return NodeError(node,
                       absl::StrCat("weights input must be float32 [", scores->shape[1], "], not ",
                                    ToString(w->dtype), " ", ShapeString(w->shape)));
    }
  }
  ES_ASSIGN_OR_RETURN(const std::string reduction_name, node.Get<std::string>("reduction", "mean"));
  Reduction reduction;
  if (reduction_name == "none") {
    reduction = Reduction::kNone;
  } else if (reduction_name == "sum") {
    reduction = Reduction::kSum;
  } else if (reduction_name == "mean") {
    reduction = Reduction::kMean;
  } else {
    return NodeError(
        node, absl::StrCat("attribute reduction ", reduction_name, " is not none, sum or mean"));
  }
  const bool has_ignore = node.attributes.count("ignore_index") != 0;
  ES_ASSIGN_OR_RETURN(const int64_t ignore, node.Get<int64_t>("ignore_index", 0));
  return std::make_unique<SoftmaxCrossEntropyLossOp>(scores->shape, reduction, has_ignore, ignore);
}

}  // namespace easyscale::graph
