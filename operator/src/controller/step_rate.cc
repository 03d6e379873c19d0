// Steps per second over a sliding window.
#include "controller/step_rate.h"

#include <cmath>

namespace easyscale::op {

void StepRate::Observe(int64_t step, Clock::time_point now) {
  if (!samples_.empty()) {
    if (step == samples_.back().step) return;  // no progress: the time it was reached stays
    if (step < samples_.back().step || now < samples_.back().at) samples_.clear();
  }
  samples_.push_back({step, now});
  // The oldest sample kept is the newest one at least a window old: the slope
  // spans the whole window once the job has run that long.
  while (samples_.size() > 2 && samples_[1].at <= now - window_) samples_.pop_front();
}

std::optional<double> StepRate::StepsPerSecond(Clock::time_point now) const {
  if (samples_.size() < 2 || now - samples_.back().at > window_) return std::nullopt;
  const Sample& first = samples_.front();
  const Sample& last = samples_.back();
  const double seconds = std::chrono::duration<double>(last.at - first.at).count();
  if (seconds < 1.0) return std::nullopt;
  return static_cast<double>(last.step - first.step) / seconds;
}

std::optional<int64_t> StepRate::RemainingSeconds(int64_t step, int64_t total,
                                                  Clock::time_point now) const {
  const std::optional<double> rate = StepsPerSecond(now);
  if (!rate) return std::nullopt;
  if (step >= total) return 0;
  return static_cast<int64_t>(std::ceil(static_cast<double>(total - step) / *rate));
}

}  // namespace easyscale::op
