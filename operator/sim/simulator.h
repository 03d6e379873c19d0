// File: operator/sim/simulator.h
//
// Replays a trace under one scheduling policy, event by event, with the
// operator's own InterJobScheduler deciding. Policies:
//   easyscale    elastic, heterogeneous: jobs take any idle GPU mix and give
//                GPUs back to inference at once (preemption)
//   homogeneous  elastic, but a job's workers share one GPU type
//   static       gang scheduling: a job waits for maxWorkers GPUs of one type
//                and keeps them to the end; inference waits for training
//   paper, paper-homogeneous, yarn-cs
//                the EasyScale paper's policy (heterogeneous, or every job on
//                one type) and its YARN-CS baseline (baselines.h)
// Every policy but easyscale and paper keeps a job with a preferred GPU type
// on that type, as the paper's homogeneous runs do.
//   PolicyResult r = Simulate(trace, Policy::kEasyScale, SimOptions{});
#pragma once

#include <map>
#include <string>
#include <vector>

#include "trace.h"

namespace easyscale::sim {

enum class Policy { kEasyScale, kHomogeneous, kStatic, kPaper, kPaperHomogeneous, kYarnCs };
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

// GPU-seconds training held, and how they were spent: computing, idle within a
// step waiting for the job's slowest worker, or paused while the job
// (re)configures.
struct GpuTime {
  double allocated = 0.0, useful = 0.0, idleInStep = 0.0, paused = 0.0;
  void Add(const GpuTime& o);
};

struct JobOutcome {
  std::string name;
  double jct = -1.0;       // finish - submit; -1 unfinished
  double aloneJct = 0.0;   // alone on its preferred GPUs: AloneSeconds()
  double slowdown = -1.0;  // jct / aloneJct; -1 unfinished
  int reconfigurations = 0;
  GpuTime gpuTime;
};

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
  double makespan = 0.0;  // last finish, from time 0; 0 if none finished
  std::map<std::string, GpuTime> gpuTimeByType;
  GpuTime gpuTime;                 // all types
  double usefulUtilisation = 0.0;  // useful GPU-s / (all GPUs x makespan)
  double wasteFraction = 0.0;      // idle-in-step / allocated GPU-s
  Summary slowdown;                // completed jobs
  std::vector<JobOutcome> jobs;    // trace order
};

// Seconds `job` takes alone in the cluster on min(maxWorkers, GPUs of the
// type) GPUs of its preferred type (else its fastest allowed type), with one
// rescale pause: the reference of its slowdown.
double AloneSeconds(const Trace& trace, const TraceJob& job, const SimOptions& options);

PolicyResult Simulate(const Trace& trace, Policy policy, const SimOptions& options);

}  // namespace easyscale::sim
