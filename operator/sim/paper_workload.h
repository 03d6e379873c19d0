// File: operator/sim/paper_workload.h
//
// The EasyScale SC'23 artifact's workload format (its simulator/workloads/
// test.csv) and a step-time profile table, turned into an easyscale-sim Trace
// on the artifact's cluster. Formats: PAPER_WORKLOAD.md.
//   StatusOr<StepProfile> p = ReadStepProfileFile("traces/paper/step_profile.csv");
//   StatusOr<Trace> t = ReadPaperWorkloadFile("traces/paper/workload.csv", *p, PaperCluster{});
#pragma once

#include <map>
#include <string>

#include "trace.h"

namespace easyscale::sim {

// Per model: the seconds one EST's mini-batch of `batch` samples takes on one
// GPU of each type, and the samples of one epoch.
struct ModelProfile {
  double samplesPerEpoch = 0.0;
  struct Point {
    int batch = 0;
    double seconds = 0.0;
  };
  std::map<std::string, Point> byGpu;
  // Seconds of a mini-batch of `batch` samples: proportional to the batch.
  double StepSeconds(const std::string& gpuType, int batch) const;
};
struct StepProfile {
  std::map<std::string, ModelProfile> models;
};

StatusOr<StepProfile> ParseStepProfile(const std::string& text, const std::string& source);
StatusOr<StepProfile> ReadStepProfileFile(const std::string& path);

// The artifact's cluster: GPUs per type, in nodes of `gpusPerNode`.
struct PaperCluster {
  std::map<std::string, int> gpus = {{"v100", 32}, {"p100", 16}, {"t4", 16}};
  int gpusPerNode = 8;
};

// One job per row: ESTs = max parallelism (each EST trains `batch_size`
// samples a step), 1..max workers, work = epochs x the model's epoch; a
// heterogeneous job may use any type, the others only their preferred one.
// A row repeating an earlier name replaces it, as the artifact's loader does.
StatusOr<Trace> ParsePaperWorkload(const std::string& text, const std::string& source,
                                   const StepProfile& profile, const PaperCluster& cluster);
StatusOr<Trace> ReadPaperWorkloadFile(const std::string& path, const StepProfile& profile,
                                      const PaperCluster& cluster);

}  // namespace easyscale::sim
