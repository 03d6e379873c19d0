// File: operator/sim/trace.h
//
// A cluster trace for easyscale-sim: GPU nodes, inference GPU demand over time
// and training job arrivals. The CSV format is documented in TRACE_FORMAT.md.
//   StatusOr<Trace> t = ParseTrace(text, "default.csv");  // errors name line and field
//   std::string csv = FormatTrace(*t);                     // parses back to *t
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::sim {

struct TraceNode {
  std::string name;
  std::string gpuType;
  int gpus = 0;
};

// From `time` on, inference wants `gpus` GPUs of `node`.
struct InferenceLevel {
  double time = 0.0;
  std::string node;
  int gpus = 0;
};

struct TraceJob {
  double submit = 0.0;
  std::string name;
  int ests = 1;
  int minWorkers = 1;
  int maxWorkers = 1;
  int priority = 0;
  double workSamples = 0.0;             // samples to train until done
  std::vector<std::string> gpuTypes;    // empty = any
  std::map<std::string, double> speed;  // samples/s of one worker; missing = defaults
  // The type the job would be run on alone (the paper's workloads name one;
  // the CSV trace format does not): homogeneous policies keep it there, and a
  // job's slowdown is measured against running alone on it. Empty = none.
  std::string preferredGpu;
};

struct Trace {
  double horizon = 0.0;  // seconds simulated
  std::vector<TraceNode> nodes;
  std::vector<InferenceLevel> inference;  // sorted by time (stable)
  std::vector<TraceJob> jobs;             // sorted by submit (stable)
  int TotalGpus() const;
};

inline constexpr const char* kTraceMagic = "easyscale-trace";
inline constexpr int kTraceVersion = 1;
// Bounds on what sizes a replay's work and memory (the bundled default trace:
// 0.3 MB, 3 days, 1,024 GPUs, 300 jobs).
inline constexpr size_t kMaxTraceFileBytes = 256 << 20;
inline constexpr double kMaxTraceSeconds = 3650.0 * 86400.0;  // horizon and event times: 10 years
inline constexpr int kMaxTraceGpus = 1000000;                 // all nodes together
inline constexpr int kMaxTraceJobs = 1000000;
inline constexpr double kMaxWorkSamples = 1e15;  // a job's work
inline constexpr double kMaxSpeed = 1e9;         // samples/s of one worker

StatusOr<Trace> ParseTrace(const std::string& text, const std::string& source);
StatusOr<Trace> ReadTraceFile(const std::string& path);
std::string FormatTrace(const Trace& trace);

}  // namespace easyscale::sim
