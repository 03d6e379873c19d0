#include "easyscale/worker/k8s_mode.h"

#include <httplib.h>

#include <atomic>
#include <thread>

#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"
#include "easyscale/worker/worker_process.h"

namespace easyscale {

struct ControlClient::Impl {
  explicit Impl(const std::string& url) : client(url) {
    client.set_connection_timeout(std::chrono::seconds(2));
    client.set_read_timeout(std::chrono::seconds(5));
  }
  httplib::Client client;
  std::mutex mu;  // httplib::Client is not safe for concurrent calls
};

ControlClient::ControlClient(const std::string& url) : impl_(std::make_unique<Impl>(url)) {}
ControlClient::~ControlClient() = default;

StatusOr<WorkerAssignment> ControlClient::GetAssignment(const std::string& job,
                                                        const std::string& pod) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const std::string path = "/v1/assignment?job=" + httplib::detail::encode_query_param(job) +
                           "&pod=" + httplib::detail::encode_query_param(pod);
  auto res = impl_->client.Get(path);
  if (!res)
    return absl::UnavailableError("control server unreachable: " + httplib::to_string(res.error()));
  if (res->status == 404)
    return absl::NotFoundError("pod " + pod + " is in no generation of " + job);
  if (res->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("control server answered ", res->status, ": ", res->body.substr(0, 200)));
  }
  const auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded()) return absl::DataLossError("control server sent invalid JSON");
  return ParseWorkerAssignment(j);
}

Status ControlClient::Report(const WorkerReport& report) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto res = impl_->client.Post("/v1/report", ToJson(report).dump(), "application/json");
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

}  // namespace

Status RunK8sWorker(const K8sWorkerOptions& o) {
  ControlClient client(o.control_url);
  auto stop_signal = InstallStopSignalHandlers();
  std::optional<Dataset> data;
  int64_t done_generation = -1;
  auto report = [&](const WorkerAssignment& a, WorkerState state, int64_t step, double sps,
                    const std::string& message) {
    WorkerReport r;
    r.job = o.job;
    r.pod = o.pod;
    r.generation = a.generation;
    r.rank = a.rank;
    r.state = state;
    r.step = step;
    r.samplesPerSecond = sps;
    r.message = message;
    return r;
  };
  auto unassigned_since = std::chrono::steady_clock::now();
  for (;;) {
    if (stop_signal()) return absl::OkStatus();  // SIGTERM between generations: nothing to save
    auto a = client.GetAssignment(o.job, o.pod);
    if (absl::IsNotFound(a.status()) || (a.ok() && a->generation <= done_generation) ||
        (a.ok() && a->action != WorkerAction::kRun)) {
      if (!a.ok() && std::chrono::steady_clock::now() - unassigned_since > o.unassigned_grace) {
        LogInfo("k8s", "pod is in no generation; leaving the job", {{"pod", o.pod}});
        return absl::OkStatus();
      }
      if (a.ok()) unassigned_since = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(o.poll_interval);
      continue;
    }
    if (!a.ok()) {
      if (!IsRetryable(a.status())) return a.status();
      LogWarn("k8s", "control server not reachable; retrying",
              {{"error", std::string(a.status().message())}});
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    unassigned_since = std::chrono::steady_clock::now();
    if (!data) {
      ES_ASSIGN_OR_RETURN(Dataset loaded, LoadTrainingData(a->training, o.data_path));
      data = std::move(loaded);
    }
    LogInfo("k8s", "running generation",
            {{"generation", a->generation},
             {"rank", a->rank},
             {"workers", a->worldSize},
             {"ests", a->ests}});
    (void)client.Report(report(*a, WorkerState::kRestoring, 0, 0, ""));
    GenerationWatch watch(client, o, a->generation);
    WorkerProcessOptions wo;
    wo.bind_host = o.pod_ip;
    wo.print_progress = true;
    wo.stop_requested = [&] { return stop_signal() || watch.newer(); };
    // This worker's own rate (its ESTs' samples over its compute time), so the
    // operator can learn the speed of each GPU type.
    const double samples = static_cast<double>(a->ests.size()) * a->training.batchPerEst;
    wo.on_restored = [&](int64_t step) {
      (void)client.Report(report(*a, WorkerState::kRunning, step, 0, "restored"));
    };
    wo.on_step = [&](const StepStats& s) {
      const double sps = s.compute_seconds > 0 ? samples / s.compute_seconds : 0;
      (void)client.Report(report(*a, WorkerState::kRunning, s.step, sps, ""));
    };
    auto outcome = RunGeneration(*a, *data, wo);
    if (!outcome.ok()) {
      (void)client.Report(
          report(*a, WorkerState::kFailed, 0, 0, std::string(outcome.status().message())));
      return outcome.status();
    }
    done_generation = a->generation;
    WorkerReport r = report(*a, outcome->state, outcome->step, 0, "");
    if (outcome->state == WorkerState::kSucceeded) {
      r.digest = outcome->result.digest;
      r.testAccuracy = a->rank == 0 ? outcome->result.test_accuracy : -1.0;
    }
    for (int i = 0; i < 20 && !client.Report(r).ok(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    if (outcome->state == WorkerState::kSucceeded) return absl::OkStatus();
    if (stop_signal()) return absl::OkStatus();
  }
}

}  // namespace easyscale
