#include "easyscale/worker/optimizer.h"

#include <cmath>

#include "easyscale/common/checks.h"
#include "easyscale/worker/detmath.h"
#include "param_chunks.h"

namespace easyscale {
namespace {

std::vector<Tensor> ZerosLike(const std::vector<Param*>& params) {
  std::vector<Tensor> out;
  for (const Param* p : params) out.emplace_back(p->value.shape);
  return out;
}

Status LoadTensors(ByteReader& r, std::vector<Tensor>& ts, const char* field) {
  for (Tensor& t : ts) ES_RETURN_IF_ERROR(r.TensorInto(&t, field));
  return absl::OkStatus();
}

// g' = g + wd*w; v = momentum*v + g'; w = w - lr*v (formulas::SgdUpdate)
class Sgd : public Optimizer {
 public:
  Sgd(float momentum, float wd, const std::vector<Param*>& params)
      : Optimizer(params.size()), momentum_(momentum), wd_(wd), velocity_(ZerosLike(params)) {}
  void Save(ByteWriter& w) const override {
    for (const Tensor& t : velocity_) w.TensorValue(t);
  }
  Status Load(ByteReader& r) override { return LoadTensors(r, velocity_, "sgd.velocity"); }

 protected:
  formulas::UpdateRule NextRule(float lr) override {
    return {.adam = false, .lr = lr, .momentum = momentum_, .weight_decay = wd_};
  }
  std::pair<Tensor*, Tensor*> StateOf(size_t param) override {
    return {&velocity_[param], nullptr};
  }

 private:
  float momentum_, wd_;
  std::vector<Tensor> velocity_;
};

// Adam (L2 weight decay added to the gradient, as torch.optim.Adam does;
// formulas::AdamUpdate).
class Adam : public Optimizer {
 public:
  Adam(float wd, const std::vector<Param*>& params)
      : Optimizer(params.size()), wd_(wd), m_(ZerosLike(params)), v_(ZerosLike(params)) {}
  void Save(ByteWriter& w) const override {
    w.I64(t_);
    w.F64(beta1_pow_);
    w.F64(beta2_pow_);
    for (const Tensor& t : m_) w.TensorValue(t);
    for (const Tensor& t : v_) w.TensorValue(t);
  }
  Status Load(ByteReader& r) override {
    ES_RETURN_IF_ERROR(r.I64(&t_, "adam.t"));
    ES_RETURN_IF_ERROR(r.F64(&beta1_pow_, "adam.beta1_pow"));
    ES_RETURN_IF_ERROR(r.F64(&beta2_pow_, "adam.beta2_pow"));
    ES_RETURN_IF_ERROR(LoadTensors(r, m_, "adam.m"));
    return LoadTensors(r, v_, "adam.v");
  }

 protected:
  formulas::UpdateRule NextRule(float lr) override {
    ++t_;
    beta1_pow_ *= formulas::kAdamBeta1;
    beta2_pow_ *= formulas::kAdamBeta2;
    return {.adam = true,
            .lr = lr,
            .weight_decay = wd_,
            .c1 = static_cast<float>(1.0 - beta1_pow_),
            .c2_sqrt = std::sqrt(static_cast<float>(1.0 - beta2_pow_))};
  }
  std::pair<Tensor*, Tensor*> StateOf(size_t param) override { return {&m_[param], &v_[param]}; }

 private:
  float wd_;
  int64_t t_ = 0;
  double beta1_pow_ = 1.0, beta2_pow_ = 1.0;
  std::vector<Tensor> m_, v_;
};

}  // namespace

std::vector<Tensor*> Optimizer::StateTensors() {
  std::vector<Tensor*> out;
  for (size_t i = 0; i < params_; ++i) {
    const auto [s1, s2] = StateOf(i);
    out.push_back(s1);
    if (s2 != nullptr) out.push_back(s2);
  }
  return out;
}

void Optimizer::Step(KernelBackend& k, const std::vector<Param*>& params, float lr,
                     const int64_t* sums, int ests) {
  formulas::UpdateRule rule = NextRule(lr);
  if (sums != nullptr) rule.mean_of = ests;
  std::vector<size_t> firsts;  // parameter i's first sum
  size_t first = 0;
  for (const Param* p : params) {
    firsts.push_back(first);
    first += p->grad.size();
  }
  ForEachParamBatch(
      k, params,
      [&](size_t i, size_t begin, size_t end) {
        auto [s1, s2] = StateOf(i);
        return formulas::ParamPart{.n = end - begin,
                                   .sums = sums != nullptr ? sums + firsts[i] + begin : nullptr,
                                   .grad = k.At(params[i]->grad) + begin,
                                   .value = k.At(params[i]->value) + begin,
                                   .state1 = k.At(*s1) + begin,
                                   .state2 = s2 != nullptr ? k.At(*s2) + begin : nullptr};
      },
      [&](std::span<const formulas::ParamPart> parts) { k.UpdateParams(rule, parts); });
}

std::unique_ptr<Optimizer> MakeOptimizer(const TrainingArgs& a, const std::vector<Param*>& params) {
  if (a.optimizer == "adam")
    return std::make_unique<Adam>(static_cast<float>(a.weightDecay), params);
  return std::make_unique<Sgd>(static_cast<float>(a.momentum), static_cast<float>(a.weightDecay),
                               params);
}

float LearningRate(const TrainingArgs& a, int64_t step) {
  const double base = a.learningRate;
  if (step < a.warmupSteps)
    return static_cast<float>(base * static_cast<double>(step + 1) / a.warmupSteps);
  const double span = static_cast<double>(a.steps - a.warmupSteps);
  const double t = static_cast<double>(step - a.warmupSteps) / span;
  if (a.lrSchedule == "step")
    return static_cast<float>(t < 0.5 ? base : t < 0.75 ? base * 0.1 : base * 0.01);
  if (a.lrSchedule == "cosine") {
    return static_cast<float>(base * 0.5 * (1.0 + detmath::Cos(3.14159265358979323846 * t)));
  }
  return static_cast<float>(base);
}

}  // namespace easyscale
