#include "easyscale/worker/threaded_job.h"

#include <thread>

#include "easyscale/common/checks.h"
#include "easyscale/worker/est_worker.h"

namespace easyscale {

Status RunSegmentInThreads(const TrainingArgs& args, const Dataset& data, int total_ests,
                           const std::vector<ThreadedWorker>& workers, int64_t stop_at,
                           const std::string& dir, const std::string& prefix) {
  const int size = static_cast<int>(workers.size());
  std::vector<Status> results(workers.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      results[r] = [&]() -> Status {
        const Rendezvous rv{"file", dir + "/rdzv", "", 0, prefix};
        ES_ASSIGN_OR_RETURN(auto comm, ConnectCollective(rv, r, size, {}));
        WorkerConfig c{args, total_ests, workers[r].ests, dir, EstField::kNone, workers[r].backend};
        c.lanes = workers[r].lanes;
        ES_ASSIGN_OR_RETURN(auto w, EstWorker::Create(c, data, *comm));
        ES_RETURN_IF_ERROR(w->Restore().status());
        while (w->step() < stop_at) ES_RETURN_IF_ERROR(w->Step(false).status());
        return w->Checkpoint();
      }();
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) ES_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

StatusOr<std::string> TrainInThreads(const TrainingArgs& args, const Dataset& data, int total_ests,
                                     const std::vector<ThreadedSegment>& segments,
                                     const std::string& dir) {
  for (size_t i = 0; i < segments.size(); ++i) {
    const int64_t stop = i + 1 < segments.size() ? segments[i + 1].from_step : args.steps;
    ES_RETURN_IF_ERROR(RunSegmentInThreads(args, data, total_ests, segments[i].workers, stop, dir,
                                           "gen-" + std::to_string(i)));
  }
  std::vector<int> all;
  for (int e = 0; e < total_ests; ++e) all.push_back(e);
  const WorkerConfig c{args, total_ests, all, dir, EstField::kNone, "cpu"};
  ES_ASSIGN_OR_RETURN(FinalResult result, EstWorker::Finalize(c, data, args.steps));
  return result.digest;
}

}  // namespace easyscale
