#include "generator.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

namespace easyscale::sim {
namespace {

struct TypeMix {
  const char* type;
  double share;  // of the nodes
  double speed;  // relative to v100
};
// A mixed fleet as in the EasyScale paper's production cluster.
constexpr TypeMix kFleet[] = {
    {"h100", 0.15, 3.0}, {"a100", 0.35, 2.0}, {"v100", 0.30, 1.0}, {"t4", 0.20, 0.4}};

constexpr double kDay = 86400.0;

// Fraction of a node's GPUs inference wants at time t, before bursts.
double Diurnal(double t, double phase, double scale) {
  const double peak = 14.0 * 3600.0 + phase;  // mid-afternoon
  return scale * (0.45 + 0.25 * std::cos(2.0 * std::numbers::pi * (t - peak) / kDay));
}

struct Burst {
  double start, end;
  double extra;
  uint64_t nodeSalt;  // picks ~30% of nodes
};

}  // namespace

Status ValidateGeneratorOptions(const GeneratorOptions& o) {
  if (o.gpus < 1 || o.gpus > 1000000)
    return absl::InvalidArgumentError("--gpus must be in [1, 1000000]");
  if (o.jobs < 0 || o.jobs > 1000000)
    return absl::InvalidArgumentError("--jobs must be in [0, 1000000]");
  if (!(o.days > 0.0) || o.days > 365.0)
    return absl::InvalidArgumentError("--days must be in (0, 365]");
  if (o.gpusPerNode < 1 || o.gpusPerNode > 64) {
    return absl::InvalidArgumentError("gpus per node must be in [1, 64]");
  }
  if (!(o.inferenceStep >= 60.0))
    return absl::InvalidArgumentError("inference step must be >= 60 s");
  if (!(o.load > 0.0) || o.load > 100.0)
    return absl::InvalidArgumentError("--load must be in (0, 100]");
  return absl::OkStatus();
}

Trace GenerateTrace(const GeneratorOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Trace t;
  t.horizon = o.days * kDay;

  // Nodes: the fleet mix, in blocks so each type has whole nodes.
  const int nodes = (o.gpus + o.gpusPerNode - 1) / o.gpusPerNode;
  int left = o.gpus, made = 0;
  for (size_t k = 0; k < std::size(kFleet); ++k) {
    const int want = k + 1 == std::size(kFleet)
                         ? nodes - made
                         : static_cast<int>(std::round(nodes * kFleet[k].share));
    for (int i = 0; i < want && left > 0; ++i, ++made) {
      const int g = std::min(o.gpusPerNode, left);
      left -= g;
      t.nodes.push_back({absl::StrCat(kFleet[k].type, "-", i), kFleet[k].type, g});
    }
  }

  // Inference: per-node diurnal level with jitter, plus cluster bursts.
  std::vector<Burst> bursts;
  std::exponential_distribution<double> burstGap(2.0 / kDay);  // ~2 a day
  for (double b = burstGap(rng); b < t.horizon; b += burstGap(rng)) {
    bursts.push_back({b, b + 1200.0 + 2400.0 * unit(rng), 0.15 + 0.2 * unit(rng), rng()});
  }
  double idleGpuSeconds = 0.0;
  for (const TraceNode& n : t.nodes) {
    const double phase = (unit(rng) - 0.5) * 7200.0;
    const double scale = 0.8 + 0.4 * unit(rng);
    const uint64_t salt = rng();
    int last = -1;
    for (double time = 0.0; time < t.horizon; time += o.inferenceStep) {
      double f = Diurnal(time, phase, scale) + (unit(rng) - 0.5) * 0.1;
      for (const Burst& b : bursts) {
        if (time >= b.start && time < b.end && (salt ^ b.nodeSalt) % 10 < 3) f += b.extra;
      }
      const int gpus = std::clamp(static_cast<int>(std::lround(f * n.gpus)), 0, n.gpus);
      idleGpuSeconds += (n.gpus - gpus) * std::min(o.inferenceStep, t.horizon - time);
      if (gpus != last) t.inference.push_back({time, n.name, gpus});
      last = gpus;
    }
  }
  std::stable_sort(t.inference.begin(), t.inference.end(),
                   [](const auto& a, const auto& b) { return a.time < b.time; });

  // Jobs: Poisson arrivals over the first 90% of the horizon.
  const int sizes[] = {1, 2, 4, 8, 16, 32};
  const double sizeWeights[] = {30, 20, 20, 15, 10, 5};
  std::discrete_distribution<int> size(std::begin(sizeWeights), std::end(sizeWeights));
  std::lognormal_distribution<double> duration(std::log(1.5 * 3600.0), 1.0);
  const int largest = std::max(1, o.gpus / 8);
  std::vector<double> gpuSeconds;
  double offered = 0.0;
  double submit = 0.0;
  const double gap = o.jobs > 0 ? 0.9 * t.horizon / o.jobs : 1.0;
  std::exponential_distribution<double> arrival(1.0 / gap);
  for (int i = 0; i < o.jobs; ++i) {
    submit += arrival(rng);
    TraceJob j;
    j.submit = std::round(std::min(submit, 0.95 * t.horizon));
    j.name = absl::StrCat("job-", i);
    j.maxWorkers = std::min(largest, sizes[size(rng)]);
    j.ests = j.maxWorkers;
    j.minWorkers = unit(rng) < 0.3 ? std::max(1, j.maxWorkers / 2) : 1;
    j.priority = unit(rng) < 0.1 ? 1 : 0;
    const double base = 50.0 + 450.0 * unit(rng);  // samples/s on a v100
    for (const TypeMix& m : kFleet) {
      j.speed[m.type] = std::round(base * m.speed * (0.85 + 0.3 * unit(rng)) * 100.0) / 100.0;
    }
    const double u = unit(rng);
    if (u < 0.15)
      j.gpuTypes = {"a100", "h100"};
    else if (u < 0.25)
      j.gpuTypes = {"a100", "t4", "v100"};
    const double seconds = std::clamp(duration(rng), 300.0, kDay);
    gpuSeconds.push_back(seconds * j.maxWorkers);
    offered += seconds * j.maxWorkers;
    t.jobs.push_back(std::move(j));
  }
  // Reach the load with jobs of realistic length: where the arrivals alone
  // fall far short (many GPUs per job), widen every job by a power of two
  // first, then stretch durations to match `load` x the idle GPU time.
  double factor = offered > 0.0 ? o.load * idleGpuSeconds / offered : 1.0;
  const int widen = factor > 6.0 ? 1 << static_cast<int>(std::round(std::log2(factor / 3.0))) : 1;
  if (widen > 1) {
    offered = 0.0;
    for (size_t i = 0; i < t.jobs.size(); ++i) {
      TraceJob& j = t.jobs[i];
      const double seconds = gpuSeconds[i] / j.maxWorkers;
      j.maxWorkers = std::min(largest, j.maxWorkers * widen);
      j.minWorkers = std::min(j.maxWorkers, j.minWorkers * widen);
      j.ests = j.maxWorkers;
      gpuSeconds[i] = seconds * j.maxWorkers;
      offered += gpuSeconds[i];
    }
    factor = o.load * idleGpuSeconds / offered;
  }
  // Work in samples: the scaled duration at full size on a100s (one EST each).
  for (size_t i = 0; i < t.jobs.size(); ++i) {
    TraceJob& j = t.jobs[i];
    j.workSamples = std::max(1.0, std::round(gpuSeconds[i] * factor * j.speed.at("a100")));
  }
  return t;
}

}  // namespace easyscale::sim
