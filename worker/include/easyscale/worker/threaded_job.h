// File: easyscale/worker/threaded_job.h
//
// One segment of a job inside this process: a thread per physical worker,
// Gloo over loopback, each worker restoring the newest checkpoint in `dir`,
// training to `stop_at` and checkpointing with its peers. Tests use it to try
// placements and backends without starting processes.
//   ES_RETURN_IF_ERROR(RunSegmentInThreads(args, data, 8, {{{0, 1, 2, 3}}, {{4, 5, 6, 7}, "cuda"}},
//                                          args.steps, dir, "gen-0"));
#pragma once

#include <string>
#include <vector>

#include "easyscale/common/job_spec.h"
#include "easyscale/worker/dataset.h"

namespace easyscale {

struct ThreadedWorker {
  std::vector<int> ests;
  std::string backend = "cpu";
  int lanes = 0;  // WorkerConfig::lanes
};

// `prefix` names the segment's rendezvous; it must differ between segments.
Status RunSegmentInThreads(const TrainingArgs& args, const Dataset& data, int total_ests,
                           const std::vector<ThreadedWorker>& workers, int64_t stop_at,
                           const std::string& dir, const std::string& prefix);

// A whole job in this process: each segment's workers from its from_step (the
// first at 0) to the next segment's, then the digest of the final checkpoint.
struct ThreadedSegment {
  int64_t from_step = 0;
  std::vector<ThreadedWorker> workers;
};
StatusOr<std::string> TrainInThreads(const TrainingArgs& args, const Dataset& data, int total_ests,
                                     const std::vector<ThreadedSegment>& segments,
                                     const std::string& dir);

}  // namespace easyscale
