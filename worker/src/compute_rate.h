// File: worker/src/compute_rate.h
//
// The compute rate a worker reports so the operator learns the speed of its
// GPU type, which the scheduler turns into placements. One step's time is
// noise on a shared machine (a descheduled process stretches it many times,
// and a plan built on it drops a healthy worker), and a generation's first
// step warms up allocations and caches: the rate is the samples of the steps
// after the first over their summed compute time.
#pragma once

#include <cstdint>

namespace easyscale {

class ComputeRate {
 public:
  explicit ComputeRate(double samples_per_step) : samples_per_step_(samples_per_step) {}

  void AddStep(double compute_seconds) {
    if (!warmed_up_) {
      warmed_up_ = true;
      return;
    }
    seconds_ += compute_seconds;
    ++steps_;
  }

  // 0 until a step after the first.
  double SamplesPerSecond() const {
    return seconds_ > 0 ? samples_per_step_ * static_cast<double>(steps_) / seconds_ : 0.0;
  }

 private:
  double samples_per_step_;
  bool warmed_up_ = false;
  double seconds_ = 0.0;
  int64_t steps_ = 0;
};

}  // namespace easyscale
