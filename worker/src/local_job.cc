#include "easyscale/worker/local_job.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_split.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/control_protocol.h"
#include "easyscale/common/dir_lock.h"
#include "easyscale/common/est_assignment.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/http_server.h"
#include "easyscale/common/log.h"
#include "easyscale/common/rendezvous_store.h"
#include "easyscale/common/subprocess.h"

namespace easyscale {
namespace {

using Clock = std::chrono::steady_clock;

// How long interrupted workers get to checkpoint and exit before SIGKILL.
constexpr std::chrono::seconds kStopGrace(10);

// One attempt at one segment: the processes, rank 0's stdout, what it said.
// The workers die with the runner (SIGKILL when it ends, however it ends) and
// hold the checkpoint folder's lock with it until the last of them is gone.
class Generation {
 public:
  Generation(const LocalJobOptions& o, const DirLock& lock) : options_(o), lock_(lock) {}

  // The workers of the segment that starts at `from_step`.
  Status Start(const std::vector<WorkerAssignment>& workers, const std::string& folder,
               int64_t from_step) {
    for (const WorkerAssignment& w : workers) {
      const std::string path = folder + "/assignment-" + std::to_string(w.generation) + "-" +
                               std::to_string(w.rank) + ".json";
      ES_RETURN_IF_ERROR(WriteFileAtomic(path, ToJson(w).dump()));
      std::vector<std::string> args = {options_.worker_binary, "run", "--assignment", path};
      if (!options_.digits_file.empty()) {
        args.push_back("--digits-file");
        args.push_back(options_.digits_file);
      }
      if (options_.hooks.run_flags) {
        for (std::string& flag : options_.hooks.run_flags(w, from_step)) {
          args.push_back(std::move(flag));
        }
      }
      SubprocessOptions worker{
          .argv = std::move(args), .keepFds = {lock_.fd()}, .parentDeathSignal = SIGKILL};
      if (w.rank == 0) worker.stdoutTo = Output::Pipe();
      ES_ASSIGN_OR_RETURN(Subprocess p, Subprocess::Start(std::move(worker)));
      children_.push_back({w.rank, std::move(p)});
    }
    return absl::OkStatus();
  }

  // One line of rank 0's progress, or nothing within `timeout` (then the
  // caller checks the children).
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout) {
    Subprocess& rank0 = children_.front().process;
    if (rank0.stdoutEnded()) {  // rank 0 is ending; the others may take a moment
      std::this_thread::sleep_for(timeout);
      return std::nullopt;
    }
    return rank0.ReadLine(timeout);
  }

  // The rank of a worker that failed, or -1.
  int Failed() {
    for (Child& c : children_) {
      if (std::optional<int> code = c.process.Poll(); code.has_value() && *code != 0) {
        return c.rank;
      }
    }
    return -1;
  }
  bool AllExited() {
    for (Child& c : children_) {
      if (!c.process.Poll().has_value()) return false;
    }
    return true;
  }
  // True when the failed rank reported a permanent error (bad input): retrying cannot help.
  bool Permanent(int rank) { return Find(rank).process.Poll() == kPermanentExitCode; }
  std::string Describe(int rank) { return Find(rank).process.Describe(); }
  void Kill(int rank) { Find(rank).process.Signal(SIGKILL); }
  // Kills and reaps every worker.
  void KillAll() { children_.clear(); }
  // SIGTERM to every worker (they checkpoint at the next step and exit), then
  // SIGKILL to those still running after `grace`.
  void Stop(std::chrono::milliseconds grace) {
    for (Child& c : children_) c.process.Signal(SIGTERM);
    const auto deadline = Clock::now() + grace;
    for (Child& c : children_) {
      c.process.WaitOrKill(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    }
  }

 private:
  struct Child {
    int rank = 0;
    Subprocess process;
  };
  Child& Find(int rank) {
    auto it = std::find_if(children_.begin(), children_.end(),
                           [rank](const Child& c) { return c.rank == rank; });
    ES_CHECK(it != children_.end()) << "no worker of rank " << rank;
    return *it;
  }

  const LocalJobOptions& options_;
  const DirLock& lock_;
  std::vector<Child> children_;  // in rank order
};

std::string RandomToken() {
  std::random_device random;
  std::string token;
  for (int i = 0; i < 8; ++i) absl::StrAppend(&token, absl::Hex(random(), absl::kZeroPad8));
  return token;
}

nlohmann::json EstsPerWorker(const EstAssignment& a) {
  nlohmann::json counts = nlohmann::json::array();
  for (const auto& w : a.workers) counts.push_back(w.size());
  return counts;
}

// Adds `c` to `certificates` (in step order); false when its step is there
// already (a restarted segment trained it again) with the same digest.
StatusOr<bool> AddCertificate(const Certificate& c, std::vector<Certificate>* certificates) {
  for (const Certificate& seen : *certificates) {
    if (seen.step != c.step) continue;
    if (seen.digest == c.digest) return false;
    return absl::InternalError(absl::StrCat("step ", c.step, " was certified twice with digests ",
                                            seen.digest, " and ", c.digest,
                                            ": the training is not deterministic"));
  }
  certificates->push_back(c);
  std::sort(certificates->begin(), certificates->end(),
            [](const Certificate& a, const Certificate& b) { return a.step < b.step; });
  return true;
}

}  // namespace

StatusOr<std::vector<ScheduleEntry>> ParseSchedule(const std::string& text, int ests,
                                                   int64_t steps) {
  std::vector<ScheduleEntry> out;
  if (text.empty()) return absl::InvalidArgumentError("--schedule: empty");
  // StrSplit keeps empty pieces, so a stray comma anywhere is an error.
  for (const std::string& item : std::vector<std::string>(absl::StrSplit(text, ','))) {
    if (item.empty()) {
      return absl::InvalidArgumentError("--schedule: empty entry in \"" + text +
                                        "\" (a stray comma?)");
    }
    const auto colon = item.find(':');
    ScheduleEntry e;
    char* end = nullptr;
    bool ok = colon != std::string::npos && colon > 0 && colon + 1 < item.size();
    if (ok) {
      e.step = std::strtoll(item.substr(0, colon).c_str(), &end, 10);
      ok = *end == '\0';
      const std::string p = item.substr(colon + 1);
      const long long workers = std::strtoll(p.c_str(), &end, 10);
      ok = ok && *end == '\0' && workers >= 1 && workers <= kMaxWorldSize;
      e.workers = static_cast<int>(workers);
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--schedule: \"", item, "\" is not STEP:WORKERS with 1 <= WORKERS <= ", kMaxWorldSize));
    }
    if (out.empty() && e.step != 0) {
      return absl::InvalidArgumentError("--schedule: must start at step 0, got \"" + item + "\"");
    }
    if (!out.empty() && e.step <= out.back().step) {
      return absl::InvalidArgumentError("--schedule: steps must increase, \"" + item +
                                        "\" does not");
    }
    if (e.step >= steps) {
      return absl::InvalidArgumentError(
          absl::StrCat("--schedule: \"", item, "\" is at or past the last step (", steps, ")"));
    }
    if (e.workers > ests) {
      return absl::InvalidArgumentError(absl::StrCat("--schedule: \"", item, "\" asks for ",
                                                     e.workers, " workers but the job has only ",
                                                     ests, " ESTs (N < P)"));
    }
    out.push_back(e);
  }
  return out;
}

StatusOr<LocalJobResult> RunLocalJob(const LocalJobOptions& o) {
  LocalJobResult result;
  std::string dir = o.checkpoint_dir;
  bool remove_dir = false;
  if (dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "easyscale-local-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp failed");
    dir = tmpl;
    remove_dir = true;
  }
  ES_RETURN_IF_ERROR(MakeDirs(dir));
  // One run at a time writes checkpoints into a folder.
  StatusOr<DirLock> lock = DirLock::Acquire(dir);
  if (!lock.ok()) {
    return Status(lock.status().code(),
                  "--checkpoint-dir: " + std::string(lock.status().message()));
  }
  // The workers meet through this process's rendezvous store, on loopback,
  // with a token of this run (the children inherit it).
  const std::string token = RandomToken();
  setenv("EASYSCALE_CONTROL_TOKEN", token.c_str(), 1);
  RendezvousStore store;
  HttpRoutes routes;
  for (const char* method : {"GET", "PUT"}) {
    routes.Handle(method, "/v1/store", [&store, token](const HttpRequest& req) {
      if (!AuthorizedBy(req.Header("authorization"), token)) {
        return ErrorResponse(absl::UnauthenticatedError("not this run's token"));
      }
      return ServeRendezvousStore(req, store);
    });
  }
  ES_ASSIGN_OR_RETURN(
      auto server,
      HttpServer::Start({.name = "rendezvous", .address = "127.0.0.1:0"}, std::move(routes)));
  const std::string store_url = "http://127.0.0.1:" + std::to_string(server->port());
  struct Cleanup {
    std::string dir;
    bool on;
    ~Cleanup() {
      std::error_code ec;
      if (on) std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir, remove_dir};

  Clock::time_point scale_requested{};
  bool scale_pending = false;
  int previous_workers = 0;
  for (size_t seg = 0; seg < o.schedule.size(); ++seg) {
    const ScheduleEntry& entry = o.schedule[seg];
    const int64_t stop_at = seg + 1 < o.schedule.size() ? o.schedule[seg + 1].step : 0;
    ES_ASSIGN_OR_RETURN(EstAssignment assignment, AssignContiguous(o.ests, entry.workers));
    for (int attempt = 0;; ++attempt) {
      const int64_t generation = static_cast<int64_t>(seg) * 100 + attempt;
      std::vector<WorkerAssignment> workers;
      for (int r = 0; r < entry.workers; ++r) {
        WorkerAssignment w;
        w.job = "local/job";
        w.generation = generation;
        w.rank = r;
        w.worldSize = entry.workers;
        w.totalEsts = o.ests;
        w.ests = assignment.workers[r];
        w.rendezvous.url = store_url;
        w.rendezvous.prefix = "gen-" + std::to_string(generation);
        w.restore.from = RestoreFrom::kDurable;  // segments hand over through `dir`
        w.checkpointDir = dir;
        // mixed: GPU and CPU workers in one job, interchangeable bit for bit.
        w.backend = o.backend == "mixed" ? (r % 2 == 0 ? "cuda" : "cpu") : o.backend;
        w.training = o.args;
        w.output = o.output;
        w.stopAtStep = stop_at;
        w.certificateEvery = o.certificate_every;
        workers.push_back(std::move(w));
      }
      store.SetPrefix("gen-" + std::to_string(generation));
      std::printf("%s\n", nlohmann::json{{"event", "generation"},
                                         {"generation", generation},
                                         {"from_step", entry.step},
                                         {"workers", entry.workers},
                                         {"ests_per_worker", EstsPerWorker(assignment)}}
                              .dump()
                              .c_str());
      std::fflush(stdout);
      std::optional<Clock::time_point> last_step_at;
      Generation gen(o, *lock);
      ES_RETURN_IF_ERROR(gen.Start(workers, dir, entry.step));
      const auto stop_requested = [&o] { return o.stop_requested && o.stop_requested(); };
      int failed = -1;
      while (failed < 0 && !gen.AllExited() && !stop_requested()) {
        while (std::optional<std::string> line = gen.ReadLine(std::chrono::milliseconds(50))) {
          nlohmann::json ev = nlohmann::json::parse(*line, nullptr, false);
          if (ev.is_discarded() || !ev.is_object()) {
            std::printf("%s\n", line->c_str());
            continue;
          }
          const std::string kind = ev.value("event", "");
          std::string said = ev.dump();
          if (kind == "step") {
            ev["ests_per_worker"] = EstsPerWorker(assignment);
            const auto now = Clock::now();
            if (last_step_at && !scale_pending) {
              result.step_seconds.push_back(
                  std::chrono::duration<double>(now - *last_step_at).count());
            }
            last_step_at = now;
            if (scale_pending) {
              const double s =
                  std::chrono::duration<double>(Clock::now() - scale_requested).count();
              result.scale_event_seconds.push_back(s);
              std::printf("%s\n", nlohmann::json{{"event", "scale"},
                                                 {"from_workers", previous_workers},
                                                 {"to_workers", entry.workers},
                                                 {"step", ev.value("step", 0) - 1},
                                                 {"seconds", s}}
                                      .dump()
                                      .c_str());
              scale_pending = false;
            }
            const int64_t step = ev.value("step", int64_t{0});
            if (std::optional<int> rank = o.hooks.kill_after_step
                                              ? o.hooks.kill_after_step(step, entry.workers)
                                              : std::nullopt) {
              LogWarn("local", "SIGKILL to a worker, as a hook asks",
                      {{"rank", *rank}, {"step", step}});
              gen.Kill(*rank);
            }
          } else if (kind == "stopping") {
            scale_requested = Clock::now();
            scale_pending = true;
            previous_workers = entry.workers;
          } else if (kind == "output" && ev.value("path", "") == o.output.path) {
            auto written = ParseOutputDigests(ev, "output event");
            if (!written.ok()) return written.status();
            result.output = *written;
          } else if (kind == "done") {
            result.digest = ev.value("digest", "");
            result.test_accuracy = ev.value("test_accuracy", 0.0);
          } else if (kind == "certificate") {
            ES_ASSIGN_OR_RETURN(const Certificate c, ParseCertificate(ev, "certificate event"));
            ES_ASSIGN_OR_RETURN(const bool first, AddCertificate(c, &result.certificates));
            said = first ? CertificateLine(c) : "";
          }
          if (!said.empty()) std::printf("%s\n", said.c_str());
          std::fflush(stdout);
          if ((failed = gen.Failed()) >= 0 || stop_requested()) break;
        }
        if (failed < 0) failed = gen.Failed();
      }
      if (stop_requested()) {
        gen.Stop(kStopGrace);
        return absl::CancelledError(
            absl::StrCat("interrupted (SIGTERM or SIGINT); the workers are stopped",
                         o.checkpoint_dir.empty()
                             ? ""
                             : "; the same --checkpoint-dir resumes from the last checkpoint"));
      }
      if (failed < 0) break;
      const std::string why = gen.Describe(failed);
      const bool permanent = gen.Permanent(failed);
      gen.KillAll();
      scale_pending = false;
      if (permanent) {
        return absl::FailedPreconditionError(absl::StrCat(
            "worker rank ", failed, " stopped on a permanent error (its message is above)"));
      }
      if (attempt >= o.max_restarts) {
        return absl::AbortedError(absl::StrCat("worker rank ", failed, " failed (", why, ") ",
                                               attempt + 1, " times; giving up"));
      }
      ++result.restarts;
      LogWarn("local", "worker failed; restarting the segment from the last checkpoint",
              {{"rank", failed}, {"reason", why}, {"attempt", attempt + 1}});
    }
  }
  if (result.digest.empty()) return absl::InternalError("the job ended without a digest");
  std::vector<double> sorted = result.step_seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median_step = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  double max_scale = 0.0;
  for (double s : result.scale_event_seconds) max_scale = std::max(max_scale, s);
  std::printf("%s\n", nlohmann::json{{"event", "summary"},
                                     {"restarts", result.restarts},
                                     {"scale_event_seconds", result.scale_event_seconds},
                                     {"max_scale_event_seconds", max_scale},
                                     {"median_step_seconds", median_step}}
                          .dump()
                          .c_str());
  return result;
}

}  // namespace easyscale
