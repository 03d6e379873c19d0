// File: operator/sim/generator.h
//
// Synthetic but realistic cluster traces: inference follows a diurnal curve
// (peak mid-afternoon, trough at night) with per-node jitter and Poisson
// bursts; training jobs arrive as a Poisson process with a heavy-tailed size
// and duration mix, per-GPU-type speeds around typical ratios, and the work
// scaled so the offered training load is `load` times the idle GPU time.
//   Trace t = GenerateTrace(GeneratorOptions{.gpus = 10000, .jobs = 1000, .days = 7});
#pragma once

#include <cstdint>

#include "trace.h"

namespace easyscale::sim {

struct GeneratorOptions {
  int gpus = 512;
  int jobs = 200;
  double days = 2.0;
  uint64_t seed = 1;
  int gpusPerNode = 8;
  double inferenceStep = 900.0;  // seconds between inference levels
  double load = 1.0;             // offered training GPU-time / idle GPU-time
};

Status ValidateGeneratorOptions(const GeneratorOptions& o);
Trace GenerateTrace(const GeneratorOptions& o);

}  // namespace easyscale::sim
