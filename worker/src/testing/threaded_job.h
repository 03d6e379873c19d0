// File: worker/src/testing/threaded_job.h (test-only)
//
// A whole job inside this process: for each segment a thread per physical
// worker, Gloo over loopback meeting through an in-memory store, each worker
// restoring the previous segment's snapshot (handed over in memory) and
// training to the next segment's step; then the digest. Tests use it to try
// placements and backends without starting processes.
//   auto digest = TrainInThreads(args, data, 8, {{0, {{{0, 1, 2, 3}}, {{4, 5, 6, 7}, "cuda"}}}});
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

// Each segment's workers train from its from_step (the first at 0) to the
// next segment's.
struct ThreadedSegment {
  int64_t from_step = 0;
  std::vector<ThreadedWorker> workers;
};
StatusOr<std::string> TrainInThreads(const TrainingArgs& args, const Dataset& data, int total_ests,
                                     const std::vector<ThreadedSegment>& segments);

}  // namespace easyscale
