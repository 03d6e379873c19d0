// File: operator/src/controller/step_rate.h
//
// A job's measured training speed in steps per second of wall time, from the
// steps its status reports over time, and the time left to its last step.
// The rate is the slope over a sliding window of observations: recent enough
// to follow a scale event, long enough that one slow step (or a status that
// arrives late) does not swing it. Time without progress counts: a stalled job
// has no rate, and no estimate.
//   StepRate rate;
//   rate.Observe(status.step, std::chrono::steady_clock::now());
//   std::optional<int64_t> eta = rate.RemainingSeconds(status.step, spec.training.steps);
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

  // The job was at `step` at `now`. A step below the newest one (the job
  // started over, or resumed from an older checkpoint) drops what was measured.
  void Observe(int64_t step, Clock::time_point now);
  // Forgets every observation (the job stopped training: suspended).
  void Reset() { samples_.clear(); }

  // Steps per second over the window; none without two observations at least
  // a second apart, or without progress between them.
  std::optional<double> StepsPerSecond() const;
  // Whole seconds (rounded up) from `step` to `total` at the measured rate;
  // none when the rate is unknown.
  std::optional<int64_t> RemainingSeconds(int64_t step, int64_t total) const;

 private:
  struct Sample {
    int64_t step;
    Clock::time_point at;
  };
  std::chrono::seconds window_;
  std::deque<Sample> samples_;
};

}  // namespace easyscale::op
