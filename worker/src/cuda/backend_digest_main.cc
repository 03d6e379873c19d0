// cuda_backend_digest: trains the standard job in-process (workers as threads
// over Gloo, EST contexts restored from checkpoints at every scale event) once
// per schedule given, each rank on its own backend, and prints the digests.
// Exit 0 only when every schedule gives the same digest. It stands in for
// `easyscale-worker local --backend cuda|mixed` until main.cc accepts the
// backend and worker_process.cc passes it into WorkerConfig.
//
//   cuda_backend_digest DATA STEPS ESTS SCHEDULE...
//   SCHEDULE = STEP:BACKEND[,BACKEND...][/STEP:...], one backend per worker, e.g.
//   0:cpu   0:cuda   0:cuda,cuda,cuda,cuda,cuda,cuda,cuda,cuda/20:cuda,cpu,cuda
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "easyscale/common/checks.h"
#include "easyscale/common/est_assignment.h"
#include "easyscale/worker/collective.h"
#include "easyscale/worker/est_worker.h"
#include "easyscale/worker/threaded_job.h"
#include "easyscale/worker/worker_process.h"

namespace easyscale {
namespace {

struct Segment {
  int64_t from_step = 0;
  std::vector<std::string> backends;  // one per worker
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) out.push_back(part);
  return out;
}

StatusOr<std::vector<Segment>> ParseSchedule(const std::string& text) {
  std::vector<Segment> out;
  for (const std::string& seg : Split(text, '/')) {
    const size_t colon = seg.find(':');
    if (colon == std::string::npos)
      return absl::InvalidArgumentError("schedule: want STEP:BACKENDS in \"" + seg + "\"");
    Segment s;
    s.from_step = std::atoll(seg.substr(0, colon).c_str());
    s.backends = Split(seg.substr(colon + 1), ',');
    if (s.backends.empty() || (!out.empty() && s.from_step <= out.back().from_step) ||
        (out.empty() && s.from_step != 0))
      return absl::InvalidArgumentError("schedule: steps must start at 0 and ascend in \"" + text +
                                        "\"");
    out.push_back(std::move(s));
  }
  if (out.empty()) return absl::InvalidArgumentError("schedule: empty");
  return out;
}

StatusOr<std::string> Train(const TrainingArgs& args, const Dataset& data, int ests,
                            const std::vector<Segment>& schedule, const std::string& dir) {
  std::vector<ThreadedSegment> segments;
  for (const Segment& seg : schedule) {
    ES_ASSIGN_OR_RETURN(EstAssignment assignment,
                        AssignContiguous(ests, static_cast<int>(seg.backends.size())));
    ThreadedSegment t{seg.from_step, {}};
    for (size_t r = 0; r < seg.backends.size(); ++r) {
      t.workers.push_back({assignment.workers[r], seg.backends[r]});
    }
    segments.push_back(std::move(t));
  }
  std::filesystem::remove_all(dir);
  auto digest = TrainInThreads(args, data, ests, segments, dir);
  std::filesystem::remove_all(dir);
  return digest;
}

}  // namespace
}  // namespace easyscale

int main(int argc, char** argv) {
  using namespace easyscale;
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s DATA STEPS ESTS SCHEDULE...\n", argv[0]);
    return 3;
  }
  TrainingArgs args;
  args.steps = std::atoi(argv[2]);
  const int ests = std::atoi(argv[3]);
  auto data = LoadTrainingData(args, argv[1]);
  if (!data.ok()) {
    std::fprintf(stderr, "%s\n", data.status().ToString().c_str());
    return 3;
  }
  const std::string root =
      (std::filesystem::temp_directory_path() / ("es-digest-" + std::to_string(getpid()))).string();
  std::string first;
  bool all_equal = true, all_ran = true;
  for (int i = 4; i < argc; ++i) {
    auto schedule = ParseSchedule(argv[i]);
    if (!schedule.ok()) {
      std::fprintf(stderr, "%s\n", schedule.status().ToString().c_str());
      return 3;
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto digest = Train(args, *data, ests, *schedule, root + "/" + std::to_string(i));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!digest.ok()) {
      std::printf("%s: FAILED %s\n", argv[i], digest.status().ToString().c_str());
      all_ran = false;
      continue;
    }
    if (first.empty()) first = *digest;
    all_equal = all_equal && *digest == first;
    std::printf("digest %s  %6.1f s  %s\n", digest->c_str(), s, argv[i]);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(root);
  std::printf("cuda_backend_digest: %s\n", !all_ran    ? "A SCHEDULE FAILED"
                                           : all_equal ? "all digests equal"
                                                       : "DIGESTS DIFFER");
  return all_ran && all_equal ? 0 : 1;
}
