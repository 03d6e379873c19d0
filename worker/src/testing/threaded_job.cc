#include "testing/threaded_job.h"

#include <optional>
#include <thread>

#include "easyscale/common/checks.h"
#include "easyscale/worker/est_worker.h"

namespace easyscale {
namespace {

// One segment: every worker restores `start` (or starts fresh), trains to
// `stop_at`; returns rank 0's snapshot.
StatusOr<TrainingSnapshot> RunSegment(const TrainingArgs& args, const Dataset& data, int total_ests,
                                      const std::vector<ThreadedWorker>& workers, int64_t stop_at,
                                      const std::optional<TrainingSnapshot>& start) {
  const int size = static_cast<int>(workers.size());
  LocalRendezvous rendezvous;
  std::vector<Status> results(workers.size());
  TrainingSnapshot out;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      results[r] = [&]() -> Status {
        ES_ASSIGN_OR_RETURN(auto comm, rendezvous.Connect(r, size, {}));
        WorkerConfig c{args, total_ests, workers[r].ests, workers[r].backend};
        c.lanes = workers[r].lanes;
        ES_ASSIGN_OR_RETURN(auto w, EstWorker::Create(c, data, *comm));
        if (start) {
          ES_RETURN_IF_ERROR(w->Restore(*start, "previous segment"));
        } else {
          w->Initialize();
        }
        while (w->step() < stop_at) ES_RETURN_IF_ERROR(w->Step(false).status());
        if (r == 0) out = w->Snapshot();
        return absl::OkStatus();
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) ES_RETURN_IF_ERROR(s);
  return out;
}

}  // namespace

StatusOr<std::string> TrainInThreads(const TrainingArgs& args, const Dataset& data, int total_ests,
                                     const std::vector<ThreadedSegment>& segments) {
  std::optional<TrainingSnapshot> state;
  for (size_t i = 0; i < segments.size(); ++i) {
    const int64_t stop = i + 1 < segments.size() ? segments[i + 1].from_step : args.steps;
    ES_ASSIGN_OR_RETURN(state,
                        RunSegment(args, data, total_ests, segments[i].workers, stop, state));
  }
  if (!state) return absl::InvalidArgumentError("no segment to train");
  std::vector<int> all;
  for (int e = 0; e < total_ests; ++e) all.push_back(e);
  const WorkerConfig c{args, total_ests, all, "cpu"};
  ES_ASSIGN_OR_RETURN(FinalResult result, EstWorker::Finalize(c, data, *state));
  return result.digest;
}

}  // namespace easyscale
