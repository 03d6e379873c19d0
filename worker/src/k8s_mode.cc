#include "easyscale/worker/k8s_mode.h"

#include <httplib.h>

#include <atomic>
#include <thread>

#include "compute_rate.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"
#include "easyscale/worker/worker_process.h"
#include "state_server.h"

namespace easyscale {

struct ControlClient::Impl {
  Impl(const std::string& url, const std::string& t) : client(url), token(t) {
    client.set_connection_timeout(std::chrono::seconds(2));
    client.set_read_timeout(std::chrono::seconds(5));
  }
  httplib::Headers Headers() const { return {{kAuthorizationHeader, BearerToken(token)}}; }
  httplib::Client client;
  std::string token;
  std::mutex mu;  // httplib::Client is not safe for concurrent calls
};

ControlClient::ControlClient(const std::string& url, const std::string& token)
    : impl_(std::make_unique<Impl>(url, token)) {}
ControlClient::~ControlClient() = default;

StatusOr<WorkerAssignment> ControlClient::GetAssignment(const std::string& job,
                                                        const std::string& pod) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const std::string path = "/v1/assignment?job=" + httplib::detail::encode_query_param(job) +
                           "&pod=" + httplib::detail::encode_query_param(pod);
  auto res = impl_->client.Get(path, impl_->Headers());
  if (!res)
    return absl::UnavailableError("control server unreachable: " + httplib::to_string(res.error()));
  if (res->status == 404)
    return absl::NotFoundError("pod " + pod + " is in no generation of " + job);
  if (res->status != 200) {
    // 401 too: a new leader without our job's key may be followed by one with it.
    return absl::UnavailableError(
        absl::StrCat("control server answered ", res->status, ": ", res->body.substr(0, 200)));
  }
  const auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded()) return absl::DataLossError("control server sent invalid JSON");
  return ParseWorkerAssignment(j);
}

Status ControlClient::Report(const WorkerReport& report) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto res =
      impl_->client.Post("/v1/report", impl_->Headers(), ToJson(report).dump(), "application/json");
  if (!res)
    return absl::UnavailableError("control server unreachable: " + httplib::to_string(res.error()));
  if (res->status / 100 != 2) {
    return absl::UnavailableError(
        absl::StrCat("report answered ", res->status, ": ", res->body.substr(0, 200)));
  }
  return absl::OkStatus();
}

namespace {

// Watches for a generation newer than the running one, off the training thread.
class GenerationWatch {
 public:
  GenerationWatch(ControlClient& client, const K8sWorkerOptions& o, int64_t running)
      : thread_([this, &client, o, running] {
          while (!done_.load()) {
            auto a = client.GetAssignment(o.job, o.pod);
            if ((a.ok() &&
                 (a->generation > running || a->action == WorkerAction::kCheckpointAndStop)) ||
                absl::IsNotFound(a.status())) {
              newer_.store(true);
            }
            std::this_thread::sleep_for(o.poll_interval);
          }
        }) {}
  ~GenerationWatch() {
    done_.store(true);
    thread_.join();
  }
  bool newer() const { return newer_.load(); }

 private:
  std::atomic<bool> done_{false}, newer_{false};
  std::thread thread_;
};

// The worker's reports, the newest of which it repeats while it waits, so an
// operator that restarted (or a new leader) learns at once where it stands.
// Each carries the newest certificate this process computed (rank 0's).
class Reporter {
 public:
  Reporter(ControlClient& client, const K8sWorkerOptions& o, const StateServer& state)
      : client_(client), o_(o), state_(state) {}

  // `held`: the step of the whole-job state this worker holds and serves.
  WorkerReport Make(const WorkerAssignment& a, WorkerState state, int64_t step,
                    int64_t held = -1) const {
    WorkerReport r;
    r.job = o_.job;
    r.pod = o_.pod;
    r.generation = a.generation;
    r.rank = a.rank;
    r.state = state;
    r.step = step;
    r.stateStep = held;
    if (held >= 0) r.stateUrl = state_.url();
    r.certificate = certificate_;
    return r;
  }
  void Certify(const Certificate& c) { certificate_ = c; }
  void Send(const WorkerReport& r) {
    last_ = r;
    sent_ = std::chrono::steady_clock::now();
    (void)client_.Report(r);
  }
  // A report the job cannot go on without: retried for a few seconds.
  void SendSurely(const WorkerReport& r) {
    last_ = r;
    sent_ = std::chrono::steady_clock::now();
    for (int i = 0; i < 20 && !client_.Report(r).ok(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
  void Repeat() {
    if (last_ && std::chrono::steady_clock::now() - sent_ > std::chrono::seconds(1)) Send(*last_);
  }

 private:
  ControlClient& client_;
  const K8sWorkerOptions& o_;
  const StateServer& state_;
  std::optional<WorkerReport> last_;
  std::chrono::steady_clock::time_point sent_;
  Certificate certificate_;
};

// The state generation `a` starts from: this worker's own when it holds the
// planned step, else the named workers', the durable checkpoint's, or none.
StatusOr<std::optional<TrainingSnapshot>> StartingState(const WorkerAssignment& a,
                                                        const std::optional<TrainingSnapshot>& held,
                                                        const K8sWorkerOptions& o) {
  switch (a.restore.from) {
    case RestoreFrom::kPeers:
      if (held && held->step == a.restore.step) return held;
      return FetchSnapshot(a.restore, a.rank, o.job, o.token, o.peer_timeout);
    case RestoreFrom::kDurable:
      return LoadNewestCheckpoint(a.checkpointDir, a.totalEsts);
    case RestoreFrom::kFresh:
      break;
  }
  return std::optional<TrainingSnapshot>();
}

}  // namespace

Status RunK8sWorker(const K8sWorkerOptions& o) {
  ControlClient client(o.control_url, o.token);
  auto stop_signal = InstallStopSignalHandlers();
  ES_ASSIGN_OR_RETURN(auto state,
                      StateServer::Start({.address = o.pod_ip + ":" + std::to_string(o.state_port),
                                          .job = o.job,
                                          .token = o.token,
                                          .advertisedHost = o.pod_ip}));
  Reporter reporter(client, o, *state);
  std::optional<Dataset> data;
  std::optional<TrainingSnapshot> held;  // the whole job's state, served to new workers
  int64_t done_generation = -1;          // ran (or failed): wait for a newer one
  std::string failed_prefix;             // its peers could not be met: wait for another
  auto unassigned_since = std::chrono::steady_clock::now();
  for (;;) {
    if (stop_signal()) return absl::OkStatus();  // between generations: nothing in flight
    StatusOr<WorkerAssignment> a = client.GetAssignment(o.job, o.pod);
    if (absl::IsNotFound(a.status())) {
      if (std::chrono::steady_clock::now() - unassigned_since > o.unassigned_grace) {
        LogInfo("k8s", "pod is in no generation; leaving the job", {{"pod", o.pod}});
        return absl::OkStatus();
      }
      std::this_thread::sleep_for(o.poll_interval);
      continue;
    }
    if (!a.ok()) {
      if (!IsRetryable(a.status())) return a.status();
      LogWarn("k8s", "control server not answering; retrying",
              {{"error", std::string(a.status().message())}});
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    unassigned_since = std::chrono::steady_clock::now();
    if (a->action != WorkerAction::kRun || a->generation <= done_generation ||
        a->rendezvous.prefix == failed_prefix) {
      reporter.Repeat();
      std::this_thread::sleep_for(o.poll_interval);
      continue;
    }
    if (!data) {
      StatusOr<Dataset> loaded = LoadTrainingData(a->training, o.digits_file);
      if (!loaded.ok()) {
        WorkerReport r = reporter.Make(*a, WorkerState::kFailed, 0);
        r.reason = kPermanentErrorReason;
        r.message = std::string(loaded.status().message());
        reporter.SendSurely(r);
        return loaded.status();
      }
      data = std::move(*loaded);
    }
    LogInfo("k8s", "running generation",
            {{"generation", a->generation},
             {"rank", a->rank},
             {"workers", a->worldSize},
             {"ests", a->ests},
             {"restore", ToString(a->restore.from)},
             {"step", a->restore.step}});
    const int64_t held_step = held ? held->step : -1;
    StatusOr<std::optional<TrainingSnapshot>> start = StartingState(*a, held, o);
    if (!start.ok()) {  // the operator starts another generation
      done_generation = a->generation;
      WorkerReport r = reporter.Make(*a, WorkerState::kFailed, held_step, held_step);
      r.reason =
          IsPermanentWorkerError(start.status()) ? kPermanentErrorReason : "StateUnavailable";
      r.message = std::string(start.status().message());
      reporter.SendSurely(r);
      if (r.reason == kPermanentErrorReason) return start.status();
      continue;
    }
    reporter.Send(reporter.Make(*a, WorkerState::kRestoring, *start ? (**start).step : 0));
    GenerationWatch watch(client, o, a->generation);
    WorkerProcessOptions wo;
    wo.bind_host = o.pod_ip;
    wo.token = o.token;
    wo.collective_timeout = o.peer_timeout;
    wo.print_progress = true;
    wo.stop_requested = [&] { return stop_signal() || watch.newer(); };
    ComputeRate rate(static_cast<double>(a->ests.size()) * a->training.batchPerEst);
    wo.on_restored = [&](int64_t step) {
      WorkerReport r = reporter.Make(*a, WorkerState::kRunning, step);
      r.message = "restored";
      reporter.Send(r);
    };
    wo.on_certificate = [&](const Certificate& c) { reporter.Certify(c); };
    wo.on_step = [&](const StepStats& s) {
      state->Drop();  // every member restored before the step's collective
      held.reset();
      WorkerReport r = reporter.Make(*a, WorkerState::kRunning, s.step);
      rate.AddStep(s.compute_seconds);
      r.samplesPerSecond = rate.SamplesPerSecond();
      reporter.Send(r);
    };
    StatusOr<WorkerOutcome> outcome = RunGeneration(*a, *data, *start, wo);
    if (!outcome.ok()) {
      const int64_t step = held ? held->step : -1;
      WorkerReport r = reporter.Make(*a, WorkerState::kFailed, std::max<int64_t>(step, 0), step);
      r.message = std::string(outcome.status().message());
      if (absl::IsUnavailable(outcome.status())) {  // its peers could not be met
        failed_prefix = a->rendezvous.prefix;
        r.reason = "RendezvousFailed";
        reporter.SendSurely(r);
        continue;
      }
      r.reason = IsPermanentWorkerError(outcome.status()) ? kPermanentErrorReason : "WorkerError";
      reporter.SendSurely(r);
      return outcome.status();
    }
    held = outcome->snapshot;
    state->Hold(*held);
    done_generation = a->generation;
    WorkerReport r = reporter.Make(*a, outcome->state, outcome->step, held->step);
    if (outcome->state == WorkerState::kSucceeded) {
      r.digest = outcome->result.digest;
      r.testAccuracy = a->rank == 0 ? outcome->result.test_accuracy : -1.0;
      r.output = outcome->output;
      reporter.SendSurely(r);
      return absl::OkStatus();
    }
    if (!outcome->interrupted.ok()) {
      r.reason = "PeerLost";
      r.message = std::string(outcome->interrupted.message());
    }
    reporter.SendSurely(r);
    if (stop_signal()) return absl::OkStatus();
  }
}

}  // namespace easyscale
