// Real worker processes, and protocol-speaking stand-ins.
#include "pod_runtimes.h"

#include <httplib.h>
#include <signal.h>

#include <filesystem>

#include "easyscale/common/checks.h"
#include "easyscale/common/control_protocol.h"
#include "easyscale/common/log.h"
#include "easyscale/operator/scheduler.h"

namespace easyscale::op::testing {

using nlohmann::json;

ProcessRuntime::ProcessRuntime(std::string binary, std::string logDir,
                               std::map<std::string, std::string> extraEnv)
    : binary_(std::move(binary)), logDir_(std::move(logDir)), extraEnv_(std::move(extraEnv)) {}

Status ProcessRuntime::Start(const json& pod, const std::map<std::string, std::string>& env,
                             const PodSandbox* sandbox) {
  const json& container = pod["spec"]["containers"][0];
  std::vector<std::string> argv = container.value("command", std::vector<std::string>());
  if (argv.empty() && !binary_.empty()) argv.push_back(binary_);  // the image's entrypoint
  if (argv.empty()) return absl::InvalidArgumentError("the container has no command");
  if (!binary_.empty()) argv[0] = binary_;
  for (const std::string& arg : container.value("args", std::vector<std::string>())) {
    argv.push_back(arg);
  }
  std::map<std::string, std::string> all = extraEnv_;
  for (const auto& [k, v] : env) all[k] = v;
  const std::string name = pod["metadata"].value("name", "");
  SubprocessOptions options{.argv = std::move(argv),
                            .env = std::move(all),
                            .stdoutTo = Output::File(logDir_ + "/" + name + ".log", true),
                            .stderrTo = Output::SameAsStdout(),
                            .parentDeathSignal = SIGKILL};
  std::optional<SandboxEntry> entry;
  if (sandbox != nullptr) {
    StatusOr<SandboxEntry> opened = SandboxEntry::Open(*sandbox);
    if (!opened.ok()) return opened.status();
    entry.emplace(std::move(*opened));
    options.beforeExec = [&entry] { return entry->Enter(); };
  }
  StatusOr<Subprocess> p = Subprocess::Start(std::move(options));
  if (!p.ok()) return p.status();
  std::lock_guard<std::mutex> lock(mu_);
  processes_.insert_or_assign(ObjectKey(pod), std::move(*p));
  return absl::OkStatus();
}

void ProcessRuntime::Signal(const std::string& pod, int signal) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = processes_.find(pod); it != processes_.end()) it->second.Signal(signal);
}

std::optional<int> ProcessRuntime::Exited(const std::string& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = processes_.find(pod);
  return it == processes_.end() ? std::nullopt : it->second.Poll();
}

void ProcessRuntime::Remove(const std::string& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  processes_.erase(pod);
}

ImageRuntimes::ImageRuntimes(std::map<std::string, std::unique_ptr<PodRuntime>> byRepository)
    : byRepository_(std::move(byRepository)) {}

PodRuntime* ImageRuntimes::For(const json& pod) const {
  std::string image = pod["spec"]["containers"][0].value("image", "");
  image = image.substr(0, image.find('@'));
  // The tag follows the last colon after the last slash (a registry may have a port).
  if (const size_t colon = image.rfind(':');
      colon != std::string::npos && image.find('/', colon) == std::string::npos) {
    image.resize(colon);
  }
  auto it = byRepository_.find(image);
  return it == byRepository_.end() ? nullptr : it->second.get();
}

PodRuntime* ImageRuntimes::Running(const std::string& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pods_.find(pod);
  return it == pods_.end() ? nullptr : it->second;
}

bool ImageRuntimes::Runs(const json& pod) const { return For(pod) != nullptr; }

Status ImageRuntimes::Start(const json& pod, const std::map<std::string, std::string>& env,
                            const PodSandbox* sandbox) {
  PodRuntime* runtime = For(pod);
  if (runtime == nullptr) return absl::NotFoundError("no runtime plays the pod's image");
  ES_RETURN_IF_ERROR(runtime->Start(pod, env, sandbox));
  std::lock_guard<std::mutex> lock(mu_);
  pods_[ObjectKey(pod)] = runtime;
  return absl::OkStatus();
}

void ImageRuntimes::Signal(const std::string& pod, int signal) {
  if (PodRuntime* r = Running(pod)) r->Signal(pod, signal);
}

std::optional<int> ImageRuntimes::Exited(const std::string& pod) {
  PodRuntime* r = Running(pod);
  return r == nullptr ? std::nullopt : r->Exited(pod);
}

void ImageRuntimes::Remove(const std::string& pod) {
  PodRuntime* r = Running(pod);
  if (r == nullptr) return;
  r->Remove(pod);
  std::lock_guard<std::mutex> lock(mu_);
  pods_.erase(pod);
}

std::unique_ptr<ProcessRuntime> WorkerRuntime(const std::string& worker, const std::string& logDir,
                                              bool sharedNetwork,
                                              std::map<std::string, std::string> env) {
  env.emplace("EASYSCALE_DATA",
              std::filesystem::path(worker).parent_path().parent_path() / "data/mnist-digits.esd");
  if (sharedNetwork) env.emplace("EASYSCALE_STATE_PORT", std::string(1, '0'));
  return std::make_unique<ProcessRuntime>(worker, logDir, std::move(env));
}

ProtocolWorkerRuntime::ProtocolWorkerRuntime(std::chrono::milliseconds miniBatch)
    : miniBatch_(miniBatch) {}

ProtocolWorkerRuntime::~ProtocolWorkerRuntime() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [pod, w] : workers_) w->stop = true;
  for (auto& [pod, w] : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

Status ProtocolWorkerRuntime::Start(const json& pod, const std::map<std::string, std::string>& env,
                                    const PodSandbox*) {
  auto w = std::make_unique<Worker>();
  Worker* raw = w.get();
  const auto get = [&](const char* k) {
    auto it = env.find(k);
    return it == env.end() ? std::string() : it->second;
  };
  // A worker trains at a rate proportional to its GPU type's default speed.
  const SchedulerOptions defaults;
  auto speed = defaults.defaultSpeed.find(get("EASYSCALE_GPU_TYPE"));
  const double samplesPerSecond =
      25.0 * (speed == defaults.defaultSpeed.end() ? 1.0 : speed->second);
  raw->thread = std::thread(&ProtocolWorkerRuntime::Run, this, raw, get("EASYSCALE_CONTROL_URL"),
                            get("EASYSCALE_JOB"), get("POD_NAME"), get("EASYSCALE_CONTROL_TOKEN"),
                            samplesPerSecond);
  std::lock_guard<std::mutex> lock(mu_);
  workers_[ObjectKey(pod)] = std::move(w);
  return absl::OkStatus();
}

void ProtocolWorkerRuntime::Signal(const std::string& pod, int signal) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(pod);
  if (it == workers_.end()) return;
  if (signal == SIGKILL) it->second->killed = true;
  it->second->stop = true;
}

std::optional<int> ProtocolWorkerRuntime::Exited(const std::string& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(pod);
  if (it == workers_.end() || !it->second->done) return std::nullopt;
  return it->second->killed ? 128 + SIGKILL : 0;
}

void ProtocolWorkerRuntime::Remove(const std::string& pod) {
  std::unique_ptr<Worker> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = workers_.find(pod);
    if (it == workers_.end()) return;
    w = std::move(it->second);
    workers_.erase(it);
  }
  w->stop = true;
  if (w->thread.joinable()) w->thread.join();
}

// One worker: step every mini-batch while told Run; stop when a newer
// generation or CheckpointAndStop shows up, saying it holds the state at its
// step (it serves nothing: nobody fetches from a protocol worker); leave on 404.
void ProtocolWorkerRuntime::Run(Worker* w, std::string url, std::string job, std::string pod,
                                std::string token, double samplesPerSecond) {
  httplib::Client c(url);
  c.set_connection_timeout(1, 0);
  c.set_read_timeout(2, 0);
  const httplib::Headers auth = {{kAuthorizationHeader, BearerToken(token)}};
  int64_t running = 0;  // the generation this worker trains in; 0 = none
  int rank = 0;
  int64_t step = 0;
  auto report = [&](int64_t generation, WorkerState state, const std::string& digest = "") {
    WorkerReport r{.job = job,
                   .pod = pod,
                   .generation = generation,
                   .rank = rank,
                   .state = state,
                   .step = step,
                   .samplesPerSecond = samplesPerSecond,
                   .digest = digest};
    if (state == WorkerState::kCheckpointed) {
      r.stateStep = step;
      r.stateUrl = "http://" + pod + ".invalid:29400";
    }
    (void)c.Post("/v1/report", auth, ToJson(r).dump(), "application/json");
  };
  while (!w->stop) {
    std::this_thread::sleep_for(miniBatch_);  // one mini-batch
    auto res = c.Get("/v1/assignment?job=" + job + "&pod=" + pod, auth);
    if (!res) continue;
    if (res->status == 404) break;  // in no generation: exit
    if (res->status != 200) continue;
    StatusOr<WorkerAssignment> a = ParseWorkerAssignment(json::parse(res->body, nullptr, false));
    if (!a.ok()) continue;
    if (running != 0 &&
        (a->generation > running || a->action == WorkerAction::kCheckpointAndStop)) {
      report(running, WorkerState::kCheckpointed);  // at this step boundary
      running = 0;
      if (a->action == WorkerAction::kCheckpointAndStop) continue;  // 404 comes next
    }
    if (running == 0 && a->action == WorkerAction::kRun) {
      running = a->generation;
      rank = a->rank;
      if (a->restore.from == RestoreFrom::kPeers) step = a->restore.step;
      if (a->restore.from == RestoreFrom::kFresh) step = 0;
      report(running, WorkerState::kRunning);
    }
    if (running == 0) continue;
    ++step;
    if (step >= a->training.steps) {
      report(running, WorkerState::kSucceeded, std::string(64, '0'));
      break;
    }
    report(running, WorkerState::kRunning);
  }
  if (w->stop && !w->killed && running != 0) report(running, WorkerState::kCheckpointed);
  w->done = true;
}

}  // namespace easyscale::op::testing
