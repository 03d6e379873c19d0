// File: easyscale/operator/backoff.h
//
// Exponential backoff with jitter for reconnects: each Next() doubles the base
// delay up to `max` and adds a random share of up to `jitter` of it, so many
// clients that lost the same server do not come back in lock step.
#pragma once

#include <chrono>
#include <random>

namespace easyscale::op {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double jitter = 0.5)
      : initial_(initial),
        max_(max),
        jitter_(jitter),
        current_(initial),
        rng_(std::random_device{}()) {}

  std::chrono::milliseconds Next() {
    const auto base = current_;
    current_ = std::min(current_ * 2, max_);
    std::uniform_real_distribution<double> extra(0.0, jitter_);
    return std::chrono::milliseconds(
        static_cast<int64_t>(static_cast<double>(base.count()) * (1.0 + extra(rng_))));
  }
  void Reset() { current_ = initial_; }

 private:
  std::chrono::milliseconds initial_, max_;
  double jitter_;
  std::chrono::milliseconds current_;
  std::mt19937_64 rng_;
};

}  // namespace easyscale::op
