// Starting and querying the simulated cluster.
#include "test_cluster.h"

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "easyscale/common/checks.h"
#include "easyscale/common/control_protocol.h"
#include "easyscale/common/file_io.h"
#include "pod_runtimes.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {

using nlohmann::json;

int FreePort() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  close(s);
  return ntohs(addr.sin_port);
}

std::vector<std::string> FastLeaderElectionArgs() {
  return {"--leader-elect",
          "--lease-namespace",
          "default",
          "--lease-duration",
          "2",
          "--renew-deadline",
          "1.5",
          "--retry-period",
          "0.2"};
}

std::string OperatorBinary() {
  // Another build's operator, for a bench's before/after.
  const char* other = std::getenv("EASYSCALE_OPERATOR_BIN");
  return other != nullptr && *other != '\0' ? other : EASYSCALE_OPERATOR_BIN;
}

std::string WorkerBinary() {
  // The worker is another part's target; look beside the operator, then in the
  // repository's other build folders.
  namespace fs = std::filesystem;
  const fs::path besides = fs::path(EASYSCALE_OPERATOR_BIN).parent_path() / "easyscale-worker";
  if (fs::exists(besides)) return besides.string();
  for (const char* dir : {"build", "build-worker", "build-lead"}) {
    const fs::path p = fs::path(EASYSCALE_SOURCE_DIR) / dir / "bin" / "easyscale-worker";
    if (fs::exists(p)) return p.string();
  }
  return "";
}

std::string LocalRunOutput(const std::string& worker, const std::string& dir,
                           const std::vector<std::string>& args) {
  std::vector<std::string> argv = {worker, "local", "--checkpoint-dir", dir + "/ref-ckpt"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::filesystem::remove_all(dir + "/ref-ckpt");  // each run from step 0
  StatusOr<CommandResult> r = RunCommand({.argv = std::move(argv),
                                          .stdoutTo = Output::Pipe(),
                                          .stderrTo = Output::File(dir + "/reference.stderr")},
                                         std::chrono::seconds(300));
  if (!r.ok() || r->exitCode != 0) return "";
  return r->out;
}

std::string FixedRunDigest(const std::string& worker, const std::string& dir, int64_t steps,
                           const std::vector<std::string>& model) {
  std::vector<std::string> args = {"--ests", "8",       "--schedule",
                                   "0:8",    "--steps", std::to_string(steps)};
  args.insert(args.end(), model.begin(), model.end());
  const std::string out = LocalRunOutput(worker, dir, args);
  const size_t at = out.rfind("\ndigest: ");
  return at == std::string::npos ? "" : out.substr(at + 9, 64);
}

int OperatorProcess::Get(int port, const std::string& path, std::string* body) const {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(1, 0);
  c.set_read_timeout(2, 0);
  auto res = c.Get(path);
  if (!res) return 0;
  if (body != nullptr) *body = res->body;
  return res->status;
}

TestCluster::TestCluster(const std::string& name, TestClusterOptions options) : options_(options) {
  dir_ = (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(getpid()) + "-" + std::to_string(rand())))
             .string();
  std::filesystem::create_directories(dir_);
}

TestCluster::~TestCluster() {
  kubelet_.reset();
  if (service_) service_->stop();
  if (serviceThread_.joinable()) serviceThread_.join();
  runtime_.reset();
  for (auto& o : operators_) o->process->Signal(SIGTERM);
  operators_.clear();  // each gets up to its stop grace to end
  client_.reset();
  server_.reset();
  network_.reset();  // the pods are gone
  if (std::getenv("EASYSCALE_KEEP_TEST_DIR") == nullptr) std::filesystem::remove_all(dir_);
}

Status TestCluster::StartApiServer() {
  if (options_.isolatePods) {
    ES_ASSIGN_OR_RETURN(network_, PodNetwork::Create());
    volumes_ = std::make_unique<PodVolumes>(dir_ + "/volumes");
  }
  // On the pod network's host address when pods are isolated, where they reach it.
  ES_ASSIGN_OR_RETURN(server_, TestApiServer::Start({.tls = true,
                                                     .token = "test-token",
                                                     .address = hostAddress(),
                                                     .bookmarkIntervalMs = 500,
                                                     .strictFieldValidation = true}));
  kubeconfig_ = dir_ + "/kubeconfig";
  ES_RETURN_IF_ERROR(server_->WriteKubeconfig(kubeconfig_));
  ES_ASSIGN_OR_RETURN(client_, KubeClient::Create(server_->ClientConfig()));
  return absl::OkStatus();
}

std::string TestCluster::hostAddress() const {
  return network_ != nullptr ? network_->hostAddress() : "127.0.0.1";
}

Status TestCluster::AddNodes(const std::vector<NodeSpec>& nodes) {
  for (const NodeSpec& n : nodes) {
    ES_RETURN_IF_ERROR(client_->Create(kNodes, "", GpuNode(n.name, n.gpuType, n.gpus)).status());
  }
  return absl::OkStatus();
}

Status TestCluster::AddTwoNodesWithInference(const std::string& inference) {
  ES_RETURN_IF_ERROR(AddNodes({{"n1", "a100", 2}, {"n2", "h100", 2}}));
  return client_->Create(kPods, "default", InferencePod(inference, "n1", 2)).status();
}

OperatorProcess* TestCluster::StartOperator(const std::string& identity,
                                            std::vector<std::string> extraArgs,
                                            const std::string& controlUrl) {
  auto o = std::make_unique<OperatorProcess>();
  o->identity = identity;
  o->controlHost = hostAddress();
  o->log = dir_ + "/operator-" + identity + ".log";
  // FreePort's ports were free a moment ago: another test's process may bind
  // one first, and the operator then exits naming the busy address. Start it
  // again on other ports (its log keeps every attempt).
  for (int attempt = 1;; ++attempt) {
    StartOperatorOnFreePorts(*o, extraArgs, controlUrl);
    if (attempt == 3 || !ExitedOnABusyPort(*o)) break;
  }
  operators_.push_back(std::move(o));
  return operators_.back().get();
}

void TestCluster::StartOperatorOnFreePorts(OperatorProcess& o,
                                           const std::vector<std::string>& extraArgs,
                                           const std::string& controlUrl) {
  o.healthPort = FreePort();
  o.metricsPort = FreePort();
  o.controlPort = FreePort();
  std::vector<std::string> args = {
      "--kubeconfig", kubeconfig_, "--identity", o.identity, "--health-addr",
      "127.0.0.1:" + std::to_string(o.healthPort), "--metrics-addr",
      "127.0.0.1:" + std::to_string(o.metricsPort), "--control-addr",
      o.controlHost + ":" + std::to_string(o.controlPort), "--control-url",
      controlUrl.empty() ? o.controlUrl() : controlUrl,
      // As the chart runs it: every replica derives the jobs' tokens from one
      // key, which the first creates in a Secret.
      "--control-key-secret", "easyscale-control-key", "--resync", "0.5"};
  args.insert(args.begin(), OperatorBinary());
  args.insert(args.end(), extraArgs.begin(), extraArgs.end());
  StatusOr<Subprocess> started = Subprocess::Start({.argv = std::move(args),
                                                    .stdoutTo = Output::File(o.log, true),
                                                    .stderrTo = Output::SameAsStdout(),
                                                    .parentDeathSignal = SIGKILL,
                                                    .stopGrace = std::chrono::seconds(5)});
  ES_CHECK(started.ok()) << started.status();
  o.process = std::move(*started);
}

bool TestCluster::ExitedOnABusyPort(OperatorProcess& o) {
  // The servers listen before anything else starts: the health port answers
  // (503 until the operator leads and its caches sync) or the process ends.
  const bool up = op::testing::Eventually(
      [&] { return o.process->Poll().has_value() || o.Get(o.healthPort, "/healthz") != 0; });
  if (!up || !o.process->Poll().has_value()) return false;
  const StatusOr<std::string> text = ReadFile(o.log, 1 << 20);
  return text.ok() && text->find("Address already in use") != std::string::npos;
}

std::string OperatorProcess::LogTail() const {
  const StatusOr<std::string> text = ReadFile(log, 1 << 20);
  if (!text.ok()) return std::string(text.status().message());
  constexpr size_t kTail = 3000;
  return "\n" + identity + "'s log (end):\n" +
         (text->size() > kTail ? text->substr(text->size() - kTail) : *text);
}

void TestCluster::StartKubelet(std::unique_ptr<PodRuntime> runtime) {
  runtime_ = std::move(runtime);
  std::optional<PodIsolation> isolation;
  if (network_ != nullptr) {
    isolation = PodIsolation{network_.get(), volumes_.get(),
                             PodIsolation::ApiServer{.host = hostAddress(),
                                                     .port = server_->port(),
                                                     .token = "test-token",
                                                     .caPem = server_->caPem()}};
  }
  kubelet_ = std::make_unique<StandInKubelet>(client_.get(), runtime_.get(), isolation,
                                              StandInKubeletOptions{options_.devicePlugins});
  kubelet_->Start();
}

OperatorProcess* TestCluster::StartWithRealWorkers(const std::string& identity,
                                                   const std::string& worker) {
  StartKubelet(WorkerRuntime(worker, dir_, !options_.isolatePods));
  return StartOperator(identity, {"--worker-backend", "cpu", "--worker-command", worker});
}

std::string TestCluster::ClaimDir(const std::string& ns, const std::string& claimName) const {
  return volumes_ != nullptr ? volumes_->ClaimDir(ns, claimName) : "";
}

std::string TestCluster::PodNetns(const std::string& key) const {
  if (network_ == nullptr) return "";
  std::optional<PodNetwork::Pod> pod = network_->FindPod(key);
  return pod ? pod->netns : "";
}

std::string TestCluster::StartControlService() {
  service_ = std::make_unique<httplib::Server>();
  auto forward = [this](const httplib::Request& req, httplib::Response& res) {
    for (const auto& o : operators_) {
      if (o->process->Poll().has_value() || !o->Ready()) continue;
      httplib::Client c(o->controlHost, o->controlPort);
      c.set_read_timeout(5, 0);
      std::string target = req.path;
      if (!req.params.empty()) {
        char sep = '?';
        for (const auto& [k, v] : req.params) {
          target += sep + k + "=" + UrlEncode(v);
          sep = '&';
        }
      }
      httplib::Headers headers;
      if (req.has_header(kAuthorizationHeader)) {
        headers.emplace(kAuthorizationHeader, req.get_header_value(kAuthorizationHeader));
      }
      const std::string type = req.get_header_value("Content-Type");
      auto r = req.method == "GET"   ? c.Get(target, headers)
               : req.method == "PUT" ? c.Put(target, headers, req.body, type)
                                     : c.Post(target, headers, req.body, type);
      if (!r) continue;
      res.status = r->status;
      res.set_content(r->body, r->get_header_value("Content-Type"));
      return;
    }
    res.status = 503;  // no ready endpoint behind the Service
  };
  service_->Get("/v1/.*", forward);
  service_->Post("/v1/.*", forward);
  service_->Put("/v1/.*", forward);
  const int port = service_->bind_to_any_port(hostAddress());
  httplib::Server* s = service_.get();
  serviceThread_ = std::thread([s] { s->listen_after_bind(); });
  return "http://" + hostAddress() + ":" + std::to_string(port);
}

json TestCluster::Job(const std::string& name) {
  StatusOr<json> j = client_->Get(kEasyScaleJobs, "default", name);
  return j.ok() ? *j : json();
}

json TestCluster::JobStatus(const std::string& name) {
  const json j = Job(name);
  return j.is_object() ? j.value("status", json::object()) : json::object();
}

std::vector<json> TestCluster::WorkerPods(const std::string& job) {
  StatusOr<json> l = client_->List(kPods, "default", {.labelSelector = "easyscale.io/job=" + job});
  return l.ok() ? (*l)["items"].get<std::vector<json>>() : std::vector<json>();
}

int TestCluster::EventCount(const std::string& object, const std::string& reason) {
  StatusOr<json> e = client_->List(
      kEvents, "default", {.fieldSelector = "involvedObject.name=" + object + ",reason=" + reason});
  if (!e.ok()) return -1;
  // The recorder folds repeats of one message into one Event's count, as
  // client-go's event correlator does: count occurrences, not objects.
  int occurrences = 0;
  for (const json& item : (*e)["items"]) occurrences += item.value("count", 1);
  return occurrences;
}

std::string TestCluster::LeaseHolder(const std::string& lease) {
  StatusOr<json> l = client_->Get(kLeases, "default", lease);
  return l.ok() ? (*l)["spec"].value("holderIdentity", "") : "";
}

}  // namespace easyscale::op::testing
