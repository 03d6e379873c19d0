// File: operator/sim/simulator.h
//
// Replays a trace under one scheduling policy, event by event, with the
// operator's own InterJobScheduler deciding. Policies:
//   easyscale    elastic, heterogeneous: jobs take any idle GPU mix and give
//                GPUs back to inference at once (preemption)
//   homogeneous  elastic, but a job's workers share one GPU type
//   static       gang scheduling: a job waits for maxWorkers GPUs of one type
//                and keeps them to the end; inference waits for training
//   PolicyResult r = Simulate(trace, Policy::kEasyScale, SimOptions{});
#pragma once

#include <string>
#include <vector>

#include "trace.h"

namespace easyscale::sim {

enum class Policy { kEasyScale, kHomogeneous, kStatic };
const char* PolicyName(Policy p);
StatusOr<Policy> ParsePolicy(const std::string& name);

struct SimOptions {
  double tick = 60.0;           // re-schedule on events, at most this often
  double rescalePause = 30.0;   // a (re)configured job makes no progress this long
  double preemptLatency = 1.0;  // a preempted worker frees its GPU after one mini-batch
  int seriesPoints = 480;       // utilisation samples over the horizon
};

struct Summary {
  double mean = 0.0, p50 = 0.0, p95 = 0.0;
  int count = 0;
};
Summary Summarise(std::vector<double> values);

struct PolicyResult {
  Policy policy = Policy::kEasyScale;
  double horizon = 0.0;
  int totalGpus = 0;
  double utilisation = 0.0;    // mean busy GPUs (training + inference) / total
  double trainingShare = 0.0;  // mean training GPUs / total
  double inferenceShare = 0.0;
  std::vector<double> utilisationSeries;  // per bucket of horizon / seriesPoints
  std::vector<double> inferenceSeries;    // inference's own share, same buckets
  int jobsSubmitted = 0, jobsStarted = 0, jobsCompleted = 0;
  Summary completionSeconds;  // finish - submit, completed jobs
  Summary queueingSeconds;    // first start - submit, started jobs
  int preemptionEvents = 0;   // (job, node) preemptions
  int preemptedWorkers = 0;
  int reconfigurations = 0;  // a running job's placements changed (each costs rescalePause)
  double inferenceWaitGpuSeconds = 0.0;  // inference demand not served
  double inferenceWaitFraction = 0.0;    // of all inference demand GPU-seconds
  double trainedSamples = 0.0;
  int decisions = 0;
  Summary decisionMs;
  double decisionMaxMs = 0.0;
};

PolicyResult Simulate(const Trace& trace, Policy policy, const SimOptions& options);

}  // namespace easyscale::sim
