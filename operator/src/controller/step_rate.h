// File: operator/src/controller/step_rate.h
//
// A job's measured training speed in steps per second of wall time, from the
// steps its status reports over time, and the time left to its last step.
// The rate is the slope between the times the job reached its steps, over a
// sliding window: recent enough to follow a scale event, long enough that one
// slow step (or a report that arrives late) does not swing it. Only progress
// is recorded, so the estimate holds still between steps (no status write for
// nothing); a job without progress for a whole window has no rate and no
// estimate.
//   StepRate rate;
//   const auto now = std::chrono::steady_clock::now();
//   rate.Observe(status.step, now);
//   std::optional<int64_t> eta = rate.RemainingSeconds(status.step, spec.training.steps, now);
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

namespace easyscale::op {

class StepRate {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StepRate(std::chrono::seconds window = std::chrono::seconds(60)) : window_(window) {}

  // The job is at `step` at `now`. A step below the newest one (the job
  // started over, or resumed from an older checkpoint) drops what was measured.
  void Observe(int64_t step, Clock::time_point now);

  // Steps per second over the window; none without two steps reached at
  // least a second apart, or when the newest was reached a window before `now`.
  std::optional<double> StepsPerSecond(Clock::time_point now) const;
  // Whole seconds (rounded up) from `step` to `total` at the measured rate;
  // none when the rate is unknown.
  std::optional<int64_t> RemainingSeconds(int64_t step, int64_t total, Clock::time_point now) const;

 private:
  struct Sample {
    int64_t step;
    Clock::time_point at;  // when the job was first seen at `step`
  };
  std::chrono::seconds window_;
  std::deque<Sample> samples_;
};

}  // namespace easyscale::op
