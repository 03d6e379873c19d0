#include "easyscale/worker/local_job.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "absl/strings/str_split.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/control_protocol.h"
#include "easyscale/common/est_assignment.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/http_server.h"
#include "easyscale/common/log.h"
#include "easyscale/common/rendezvous_store.h"

extern char** environ;

namespace easyscale {
namespace {

using Clock = std::chrono::steady_clock;

struct Child {
  pid_t pid = -1;
  int rank = 0;
  bool exited = false;
  int status = 0;
};

// One attempt at one segment: the processes, rank 0's stdout, what it said.
class Generation {
 public:
  explicit Generation(const LocalJobOptions& o) : options_(o) {}
  ~Generation() { KillAll(); }

  // `fault_step` >= 0: the last rank's backend fails in that step (test-only).
  Status Start(const std::vector<WorkerAssignment>& workers, const std::string& folder,
               int64_t fault_step) {
    for (const WorkerAssignment& w : workers) {
      const std::string path = folder + "/assignment-" + std::to_string(w.generation) + "-" +
                               std::to_string(w.rank) + ".json";
      ES_RETURN_IF_ERROR(WriteFileAtomic(path, ToJson(w).dump()));
      std::vector<std::string> args = {
          options_.worker_binary, "run", "--assignment", path, "--test-drop-context-field",
          options_.drop_field};
      if (!options_.data_path.empty()) {
        args.push_back("--data");
        args.push_back(options_.data_path);
      }
      if (fault_step >= 0 && w.rank == w.worldSize - 1) {
        args.push_back("--test-fault-at");
        args.push_back(std::to_string(fault_step));
      }
      std::vector<char*> argv;
      for (auto& s : args) argv.push_back(s.data());
      argv.push_back(nullptr);
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      int pipe_fds[2] = {-1, -1};
      if (w.rank == 0) {
        if (pipe(pipe_fds) != 0) return absl::InternalError("pipe failed");
        posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
        posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
        posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
      }
      Child c;
      c.rank = w.rank;
      const int rc = posix_spawn(&c.pid, argv[0], &actions, nullptr, argv.data(), environ);
      posix_spawn_file_actions_destroy(&actions);
      if (w.rank == 0) {
        close(pipe_fds[1]);
        out_fd_ = pipe_fds[0];
      }
      if (rc != 0) return absl::InternalError("cannot start " + options_.worker_binary);
      children_.push_back(c);
    }
    return absl::OkStatus();
  }

  // Reads one line of rank 0's progress, or returns false when none came
  // within `timeout_ms` (then the caller checks the children).
  bool ReadLine(std::string* line, int timeout_ms) {
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        *line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return true;
      }
      if (out_fd_ < 0) return false;
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, timeout_ms) <= 0) return false;
      char chunk[4096];
      const ssize_t n = read(out_fd_, chunk, sizeof chunk);
      if (n <= 0) {
        close(out_fd_);
        out_fd_ = -1;
        return false;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // Reaps exited children. Returns the rank of a failed one, or -1.
  int Reap() {
    for (Child& c : children_) {
      if (c.exited) continue;
      if (waitpid(c.pid, &c.status, WNOHANG) == c.pid) c.exited = true;
      if (c.exited && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) return c.rank;
    }
    return -1;
  }
  bool AllExited() const {
    for (const Child& c : children_) {
      if (!c.exited) return false;
    }
    return true;
  }
  // True when the failed rank reported a permanent error (bad input): retrying cannot help.
  bool Permanent(int rank) const {
    for (const Child& c : children_) {
      if (c.rank == rank) return WIFEXITED(c.status) && WEXITSTATUS(c.status) == kPermanentExitCode;
    }
    return false;
  }
  std::string Describe(int rank) const {
    for (const Child& c : children_) {
      if (c.rank != rank) continue;
      if (WIFSIGNALED(c.status)) return "killed by signal " + std::to_string(WTERMSIG(c.status));
      return "exit code " + std::to_string(WEXITSTATUS(c.status));
    }
    return "unknown";
  }
  void Kill(int rank) {
    for (Child& c : children_) {
      if (c.rank == rank && !c.exited) kill(c.pid, SIGKILL);
    }
  }
  void KillAll() {
    for (Child& c : children_) {
      if (c.exited) continue;
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &c.status, 0);
      c.exited = true;
    }
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
  }

 private:
  const LocalJobOptions& options_;
  std::vector<Child> children_;
  int out_fd_ = -1;
  std::string buffer_;
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
  // The workers meet through this process's rendezvous store, on loopback,
  // with a token of this run (the children inherit it).
  const std::string token = RandomToken();
  setenv("EASYSCALE_CONTROL_TOKEN", token.c_str(), 1);
  RendezvousStore store;
  HttpRoutes routes;
  for (const char* method : {"GET", "PUT"}) {
    routes.Handle(method, "/v1/store", [&store, token](const HttpRequest& req) {
      if (TokenFromAuthorization(req.Header("authorization")) != token) {
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

  bool killed_once = false;
  bool faulted_once = false;
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
        w.stopAtStep = stop_at;
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
      Generation gen(o);
      // The fault is injected into the first attempt that reaches its step only.
      const bool inject = o.fault_worker_at > 0 && !faulted_once &&
                          o.fault_worker_at >= entry.step &&
                          (stop_at == 0 || o.fault_worker_at < stop_at);
      faulted_once = faulted_once || inject;
      ES_RETURN_IF_ERROR(gen.Start(workers, dir, inject ? o.fault_worker_at : -1));
      int failed = -1;
      std::string line;
      while (failed < 0 && !gen.AllExited()) {
        while (gen.ReadLine(&line, 50)) {
          nlohmann::json ev = nlohmann::json::parse(line, nullptr, false);
          if (ev.is_discarded() || !ev.is_object()) {
            std::printf("%s\n", line.c_str());
            continue;
          }
          const std::string kind = ev.value("event", "");
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
            if (o.kill_worker_at > 0 && !killed_once && ev.value("step", 0) == o.kill_worker_at) {
              killed_once = true;
              LogWarn("local", "injecting failure: SIGKILL to a worker",
                      {{"rank", entry.workers - 1}, {"step", o.kill_worker_at}});
              gen.Kill(entry.workers - 1);
            }
          } else if (kind == "stopping") {
            scale_requested = Clock::now();
            scale_pending = true;
            previous_workers = entry.workers;
          } else if (kind == "done") {
            result.digest = ev.value("digest", "");
            result.test_accuracy = ev.value("test_accuracy", 0.0);
          }
          std::printf("%s\n", ev.dump().c_str());
          std::fflush(stdout);
          if ((failed = gen.Reap()) >= 0) break;
        }
        if (failed < 0) failed = gen.Reap();
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
