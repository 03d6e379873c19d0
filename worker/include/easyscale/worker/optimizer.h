// File: easyscale/worker/optimizer.h
//
// SGD with momentum and weight decay, and Adam, as PyTorch defines them, with
// one fixed order of element-wise operations (no contraction), and the
// learning-rate schedule. Their state is part of the job state and the digest.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "easyscale/common/job_spec.h"
#include "easyscale/worker/backend.h"
#include "easyscale/worker/serialize.h"

namespace easyscale {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies every p.grad to p.value on backend `k` (its memory holds both and
  // the state: KernelBackend::UpdateParams); with `sums`, the step's
  // fixed-point gradient sums (fixed_point.h) of every parameter end to end
  // in params' order, the gradients are their means over `ests` ESTs instead
  // (p.grad may be overwritten with them).
  void Step(KernelBackend& k, const std::vector<Param*>& params, float lr,
            const int64_t* sums = nullptr, int ests = 0);
  // The per-parameter state Save writes (a device's copy is uploaded from and
  // downloaded into these).
  std::vector<Tensor*> StateTensors();
  virtual void Save(ByteWriter& w) const = 0;
  virtual Status Load(ByteReader& r) = 0;

 protected:
  explicit Optimizer(size_t params) : params_(params) {}
  // This step's rule (advancing per-step state such as Adam's bias corrections),
  // and parameter i's state tensors (the second null for SGD).
  virtual formulas::UpdateRule NextRule(float lr) = 0;
  virtual std::pair<Tensor*, Tensor*> StateOf(size_t param) = 0;

 private:
  size_t params_;
};

std::unique_ptr<Optimizer> MakeOptimizer(const TrainingArgs& args,
                                         const std::vector<Param*>& params);

// Learning rate at a 0-based step: linear warm-up, then constant, step
// (x0.1 at 50% and 75%) or cosine decay, computed in double with the
// project's own cosine so every host agrees.
float LearningRate(const TrainingArgs& args, int64_t step);

}  // namespace easyscale
