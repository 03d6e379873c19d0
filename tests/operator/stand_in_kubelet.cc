// Admission, env, start, exit, deletion and shutdown of pods for tests.
#include "stand_in_kubelet.h"

#include <signal.h>

#include <algorithm>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "controller/gpu_inventory.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/log.h"
#include "easyscale/common/node_inventory.h"
#include "easyscale/operator/kube_config.h"
#include "easyscale/operator/kube_time.h"

namespace easyscale::op::testing {

using nlohmann::json;

namespace {

// How often a pod whose env cannot be resolved (a missing secret) is retried.
constexpr std::chrono::seconds kEnvRetry(1);
// What the pods still running when the kubelet stops get between SIGTERM and SIGKILL.
constexpr std::chrono::seconds kShutdownGrace(10);

std::string Namespace(const json& pod) { return pod["metadata"].value("namespace", ""); }
std::string Name(const json& pod) { return pod["metadata"].value("name", ""); }
const json& Container(const json& pod) { return pod["spec"]["containers"][0]; }
bool HasCommand(const json& pod) { return !Container(pod).value("command", json::array()).empty(); }

const Resource kServices{"", "v1", "services", "Service"};

// The grace the deletion asked for, else the pod's own (30 s by default).
int GraceSeconds(const json& pod) {
  const json& m = pod["metadata"];
  if (m.contains("deletionGracePeriodSeconds")) return m["deletionGracePeriodSeconds"].get<int>();
  return pod["spec"].value("terminationGracePeriodSeconds", 30);
}

StatusOr<std::string> SecretValue(KubeClient& client, const std::string& ns, const json& ref) {
  const std::string name = ref.value("name", "");
  const std::string key = ref.value("key", "");
  ES_ASSIGN_OR_RETURN(const json secret, client.Get(kSecrets, ns, name));
  const json data = secret.value("data", json::object());
  if (!data.contains(key)) {
    return absl::NotFoundError("couldn't find key " + key + " in Secret " + ns + "/" + name);
  }
  std::string value;
  if (!absl::Base64Unescape(data[key].get<std::string>(), &value)) {
    return absl::DataLossError("Secret " + ns + "/" + name + ": " + key + " is not base64");
  }
  return value;
}

json ContainerStatus(const json& pod, const json& state) {
  const bool running = state.contains("running");
  return json::array({{{"name", Container(pod).value("name", "")},
                       {"image", Container(pod).value("image", "")},
                       {"ready", running},
                       {"started", running},
                       {"restartCount", 0},
                       {"state", state}}});
}

}  // namespace

bool PodRuntime::Runs(const json& pod) const { return HasCommand(pod); }

StatusOr<std::map<std::string, std::string>> ResolvePodEnv(const json& pod, KubeClient& client) {
  std::map<std::string, std::string> env;
  for (const json& e : Container(pod).value("env", json::array())) {
    const std::string name = e.value("name", "");
    if (e.contains("value")) {
      env[name] = e["value"].get<std::string>();
      continue;
    }
    const json from = e.value("valueFrom", json::object());
    if (from.contains("secretKeyRef")) {
      const json& ref = from["secretKeyRef"];
      StatusOr<std::string> value = SecretValue(client, Namespace(pod), ref);
      if (value.ok()) {
        env[name] = *value;
      } else if (!ref.value("optional", false) || !absl::IsNotFound(value.status())) {
        return value.status();
      }
      continue;
    }
    const std::string path = from.value("fieldRef", json::object()).value("fieldPath", "");
    if (path == "metadata.name") env[name] = Name(pod);
    if (path == "metadata.namespace") env[name] = Namespace(pod);
    if (path == "status.podIP") env[name] = pod.value("status", json::object()).value("podIP", "");
  }
  return env;
}

StandInKubelet::StandInKubelet(KubeClient* client, PodRuntime* runtime,
                               std::optional<PodIsolation> isolation, StandInKubeletOptions options)
    : client_(client),
      runtime_(runtime),
      isolation_(isolation),
      options_(options),
      pods_(client, kPods, {}),
      nodes_(client, kNodes, {}) {}

StandInKubelet::~StandInKubelet() { Stop(); }

void StandInKubelet::Start() {
  pods_.Start();
  nodes_.Start();
  thread_ = std::thread([this] { Loop(); });
}

void StandInKubelet::Stop() {
  stopped_ = true;
  if (thread_.joinable()) thread_.join();
  pods_.Stop();
  nodes_.Stop();
}

void StandInKubelet::Loop() {
  while (!stopped_) {
    if (pods_.HasSynced() && nodes_.HasSynced()) Sync();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  StopAll();  // on this thread, which the runtime's processes die with
}

void StandInKubelet::StopAll() {
  const auto deadline = Clock::now() + kShutdownGrace;
  for (auto& [key, a] : admitted_) {
    if (a.process) runtime_->Signal(key, SIGTERM);
  }
  for (auto& [key, a] : admitted_) {
    if (!a.process) continue;
    while (!runtime_->Exited(key).has_value() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!runtime_->Exited(key).has_value()) runtime_->Signal(key, SIGKILL);
    runtime_->Remove(key);
  }
  admitted_.clear();
}

namespace {

int PodGpus(const json& p) {
  if (IsWorkerPod(p)) return 1;
  return IsInferencePod(p) ? InferenceGpus(p) : 0;
}

}  // namespace

bool StandInKubelet::Admissible(const json& p, const std::set<std::string>& names) const {
  const std::string node = p["spec"].value("nodeName", "");
  return !node.empty() && names.count(node) != 0 && p["status"].value("phase", "") == "Pending" &&
         !PodTerminated(p) && admitted_.count(ObjectKey(p)) == 0;
}

void StandInKubelet::Sync() {
  Follow();
  const std::vector<json> nodes = nodes_.List();
  std::set<std::string> names;
  for (const json& n : nodes) names.insert(n["metadata"].value("name", ""));
  std::vector<json> pods = pods_.List();
  // Oldest first; pods of one second by name, as kubelet's admission order is
  // creation time (a worker generation's pods are named in rank order).
  std::sort(pods.begin(), pods.end(), [](const json& a, const json& b) {
    return std::pair(a["metadata"].value("creationTimestamp", ""), ObjectKey(a)) <
           std::pair(b["metadata"].value("creationTimestamp", ""), ObjectKey(b));
  });
  for (const json& p : pods) {
    const std::string node = p["spec"].value("nodeName", "");
    // Terminating with nothing of it running here: confirm with a grace-0 delete.
    if (p["metadata"].contains("deletionTimestamp") && names.count(node) != 0 &&
        admitted_.count(ObjectKey(p)) == 0) {
      (void)client_->Delete(kPods, Namespace(p), Name(p), 0);
    }
  }
  if (options_.devicePlugins) return AdmitByDevice(pods, nodes, names);
  AdmitByCount(pods, nodes, names);
}

void StandInKubelet::AdmitByCount(const std::vector<json>& pods, const std::vector<json>& nodes,
                                  const std::set<std::string>& names) {
  std::map<std::string, int> capacity;
  for (const json& n : nodes) {
    int count = 0;
    for (const auto& [type, c] : NodeGpusByType(n)) count += c;
    capacity[n["metadata"].value("name", "")] = count;
  }
  std::map<std::string, int> used;
  for (const json& p : pods) {  // a Running pod holds its GPUs until it is gone
    if (p["status"].value("phase", "") == "Running")
      used[p["spec"].value("nodeName", "")] += PodGpus(p);
  }
  for (const json& p : pods) {
    if (!Admissible(p, names)) continue;
    const std::string node = p["spec"].value("nodeName", "");
    if (used[node] + PodGpus(p) > capacity[node]) {
      // kubelet's admission: a pod bound to a node without room for its
      // extended resource fails at once (the scheduler keeps an unbound one
      // Pending). Inference pods stand for the inference platform's, which
      // its scheduler binds once the GPU is free: they wait.
      if (IsWorkerPod(p)) Reject(p, kGpuResource, 1, used[node], capacity[node]);
      continue;
    }
    if (Admit(p)) used[node] += PodGpus(p);
  }
}

void StandInKubelet::AdmitByDevice(const std::vector<json>& pods, const std::vector<json>& nodes,
                                   const std::set<std::string>& names) {
  struct NodeDevices {
    std::string type;
    std::vector<std::optional<std::string>> inference, worker;  // holder of each device
  };
  std::map<std::string, NodeDevices> table;
  for (const json& n : nodes) {
    const std::map<std::string, int> gpus = NodeGpusByType(n);
    NodeDevices& d = table[n["metadata"].value("name", "")];  // a node without GPUs runs pods too
    if (gpus.empty()) continue;
    d.type = gpus.begin()->first;
    d.inference.resize(gpus.begin()->second);
    d.worker.resize(gpus.begin()->second);
  }
  std::map<std::string, std::vector<int>> kept;
  for (const json& p : pods) {  // a pod holds its devices until it ends or is gone
    auto devices = devicesOf_.find(ObjectKey(p));
    auto node = table.find(p["spec"].value("nodeName", ""));
    const std::string phase = p["status"].value("phase", "");
    if (devices == devicesOf_.end() || node == table.end() || phase == "Succeeded" ||
        phase == "Failed") {
      continue;
    }
    for (int i : devices->second) {
      if (i >= static_cast<int>(node->second.worker.size())) continue;
      (IsWorkerPod(p) ? node->second.worker : node->second.inference)[i] = ObjectKey(p);
    }
    kept.insert(*devices);
  }
  devicesOf_ = std::move(kept);
  for (const json& p : pods) {
    if (!Admissible(p, names)) continue;
    NodeDevices& d = table[p["spec"].value("nodeName", "")];
    std::vector<int> given;
    for (size_t i = 0; i < d.worker.size() && static_cast<int>(given.size()) < PodGpus(p); ++i) {
      const bool taken =
          IsWorkerPod(p) ? (d.worker[i] || d.inference[i]) : d.inference[i].has_value();
      if (!taken) given.push_back(static_cast<int>(i));
    }
    if (static_cast<int>(given.size()) < PodGpus(p)) {
      if (IsWorkerPod(p)) {  // `given` holds every free device: the others are in use
        const int devices = static_cast<int>(d.worker.size());
        Reject(p, kGpuResource, 1, devices - static_cast<int>(given.size()), devices);
      }
      continue;  // inference waits for its platform's devices
    }
    if (!Admit(p)) continue;
    for (int i : given) (IsWorkerPod(p) ? d.worker : d.inference)[i] = ObjectKey(p);
    devicesOf_[ObjectKey(p)] = given;
  }
  for (const auto& [name, d] : table) {  // as the device plugin publishes them
    if (d.worker.empty()) continue;
    std::vector<NodeGpu> gpus;
    for (size_t i = 0; i < d.worker.size(); ++i) {
      NodeGpu g;
      g.device.id = name + "-gpu" + std::to_string(i);
      g.device.type = d.type;
      g.device.index = static_cast<int>(i);
      g.held_by = d.inference[i];
      g.training_pod = d.worker[i];
      gpus.push_back(std::move(g));
    }
    const json patch = NodeInventoryPatch(gpus);
    const std::string text = patch.dump();
    if (published_[name] == text) continue;
    if (client_->MergePatch(kNodes, "", name, patch).ok()) published_[name] = text;
  }
}

void StandInKubelet::Follow() {
  for (auto it = admitted_.begin(); it != admitted_.end();) {
    const std::string& key = it->first;
    Admitted& a = it->second;
    const std::optional<json> p = pods_.Get(key);
    if (!p.has_value() || (*p)["metadata"].contains("deletionTimestamp")) {
      // Gone without a graceful deletion: no grace.
      if (!Terminate(key, a, p.has_value() ? GraceSeconds(*p) : 0)) {
        ++it;
        continue;
      }
      if (p.has_value()) (void)client_->Delete(kPods, Namespace(*p), Name(*p), 0);
      Release(key, true);
      it = admitted_.erase(it);
      continue;
    }
    if (a.process) {
      if (std::optional<int> code = runtime_->Exited(key)) {
        ReportTerminated(*p, *code, *code == 0 ? "Completed" : "Error");
        runtime_->Remove(key);
        a.process = false;
        Release(key, false);
      }
    }
    ++it;
  }
}

bool StandInKubelet::Terminate(const std::string& key, Admitted& a, int graceSeconds) {
  if (!a.process) return true;
  const auto now = Clock::now();
  if (!a.killAt.has_value()) {
    runtime_->Signal(key, SIGTERM);
    a.killAt = now + std::chrono::seconds(graceSeconds);
  }
  if (!a.killed && now >= *a.killAt) {
    runtime_->Signal(key, SIGKILL);
    a.killed = true;
  }
  if (!runtime_->Exited(key).has_value()) return false;
  runtime_->Remove(key);
  a.process = false;
  return true;
}

bool StandInKubelet::Admit(const json& p) {
  const std::string key = ObjectKey(p);
  if (auto r = retryAt_.find(key); r != retryAt_.end() && Clock::now() < r->second) return false;
  StatusOr<std::string> podIp = PodIp(key);
  if (!podIp.ok()) {
    LogError("kubelet", "no network for the pod",
             {{"pod", key}, {"error", std::string(podIp.status().message())}});
    admitted_.emplace(key, Admitted{});  // ended before it ran; forgotten once deleted
    ReportTerminated(p, 128, "StartError", std::string(podIp.status().message()));
    return true;
  }
  json pod = p;
  pod["status"]["podIP"] = *podIp;
  StatusOr<std::map<std::string, std::string>> env = ResolvePodEnv(pod, *client_);
  if (!env.ok()) {  // as kubelet: the pod waits, and its status says why
    retryAt_[key] = Clock::now() + kEnvRetry;
    const json waiting = {
        {"waiting",
         {{"reason", "CreateContainerConfigError"}, {"message", env.status().message()}}}};
    (void)client_->MergePatch(kPods, Namespace(p), Name(p),
                              {{"status", {{"containerStatuses", ContainerStatus(p, waiting)}}}},
                              true);
    return false;
  }
  retryAt_.erase(key);
  const std::string now = NowTime();
  const std::string ip = pod["status"]["podIP"];
  StatusOr<json> running = client_->MergePatch(
      kPods, Namespace(p), Name(p),
      {{"status",
        {{"phase", "Running"},
         {"podIP", ip},
         {"podIPs", {{{"ip", ip}}}},
         {"startTime", now},
         {"containerStatuses", ContainerStatus(p, {{"running", {{"startedAt", now}}}})}}}},
      true);
  if (!running.ok()) return false;
  Admitted& a = admitted_[key];
  if (runtime_ == nullptr || !runtime_->Runs(p)) return true;
  if (Status s = StartContainer(*running, *env); !s.ok()) {
    LogError("kubelet", "cannot start the pod's container",
             {{"pod", key}, {"error", std::string(s.message())}});
    ReportTerminated(*running, 128, "StartError", std::string(s.message()));
    return true;
  }
  a.process = true;
  return true;
}

StatusOr<std::string> StandInKubelet::PodIp(const std::string& key) {
  if (!isolation_.has_value()) return std::string("127.0.0.1");
  ES_ASSIGN_OR_RETURN(const PodNetwork::Pod net, isolation_->network->AddPod(key));
  return net.ip;
}

Status StandInKubelet::StartContainer(const json& pod, std::map<std::string, std::string> env) {
  if (!isolation_.has_value()) return runtime_->Start(pod, env, nullptr);
  ES_ASSIGN_OR_RETURN(const PodNetwork::Pod net, isolation_->network->AddPod(ObjectKey(pod)));
  ES_ASSIGN_OR_RETURN(std::vector<BindMount> mounts, isolation_->volumes->Prepare(pod));
  ES_ASSIGN_OR_RETURN(std::vector<BindMount> files, KubeletFiles(pod));
  mounts.insert(mounts.end(), files.begin(), files.end());
  if (const auto& api = isolation_->apiServer) {
    env.emplace("KUBERNETES_SERVICE_HOST", api->host);
    env.emplace("KUBERNETES_SERVICE_PORT", std::to_string(api->port));
  }
  const PodSandbox sandbox{net.netns, std::move(mounts), isolation_->volumes->root()};
  return runtime_->Start(pod, env, &sandbox);
}

StatusOr<std::vector<BindMount>> StandInKubelet::KubeletFiles(const json& pod) {
  const std::string dir = isolation_->volumes->PodDir(Namespace(pod), Name(pod));
  std::vector<BindMount> mounts;
  // The folders' names cannot be volume names (DNS labels), which live beside them.
  ES_RETURN_IF_ERROR(MakeDirs(dir));
  ES_RETURN_IF_ERROR(WriteFileAtomic(dir + "/.etc-hosts", HostsFile(pod)));
  mounts.push_back({.source = dir + "/.etc-hosts", .target = "/etc/hosts", .readOnly = true});
  const auto& api = isolation_->apiServer;
  if (api.has_value() && pod["spec"].value("automountServiceAccountToken", true)) {
    const std::string account = dir + "/.kube-api-access";
    ES_RETURN_IF_ERROR(MakeDirs(account));
    ES_RETURN_IF_ERROR(WriteFileAtomic(account + "/token", api->token));
    ES_RETURN_IF_ERROR(WriteFileAtomic(account + "/ca.crt", api->caPem));
    ES_RETURN_IF_ERROR(WriteFileAtomic(account + "/namespace", Namespace(pod)));
    ES_RETURN_IF_ERROR(MakeDirs(kServiceAccountDir));
    mounts.push_back({.source = account, .target = kServiceAccountDir, .readOnly = true});
  }
  return mounts;
}

std::string StandInKubelet::HostsFile(const json& pod) {
  std::string hosts = "127.0.0.1\tlocalhost\n";
  if (std::optional<PodNetwork::Pod> net = isolation_->network->FindPod(ObjectKey(pod))) {
    hosts += net->ip + "\t" + Name(pod) + "\n";
  }
  StatusOr<json> services = client_->List(kServices, "", {});
  if (!services.ok()) return hosts;
  const std::vector<json> pods = pods_.List();
  for (const json& svc : (*services)["items"]) {
    const json selector = svc["spec"].value("selector", json::object());
    if (selector.empty()) continue;
    for (const json& p : pods) {
      const json labels = p["metadata"].value("labels", json::object());
      const bool selected =
          std::all_of(selector.items().begin(), selector.items().end(),
                      [&](const auto& kv) { return labels.value(kv.key(), json()) == kv.value(); });
      const std::string ip = p.value("status", json::object()).value("podIP", "");
      if (!selected || Namespace(p) != Namespace(svc) || ip.empty() ||
          p["status"].value("phase", "") != "Running") {
        continue;
      }
      const std::string name = Name(svc) + "." + Namespace(svc) + ".svc";
      hosts += ip + "\t" + name + " " + name + ".cluster.local\n";
      break;
    }
  }
  return hosts;
}

void StandInKubelet::Release(const std::string& key, bool deleted) {
  if (!isolation_.has_value()) return;
  isolation_->network->RemovePod(key);
  const size_t slash = key.find('/');
  if (deleted) isolation_->volumes->Release(key.substr(0, slash), key.substr(slash + 1));
}

void StandInKubelet::Reject(const json& pod, const std::string& resource, int requested, int used,
                            int capacity) {
  admitted_.emplace(ObjectKey(pod), Admitted{});  // ended before it ran; forgotten once deleted
  (void)client_->MergePatch(
      kPods, Namespace(pod), Name(pod),
      {{"status",
        {{"phase", "Failed"},
         {"reason", "OutOf" + resource},
         {"message",
          absl::StrCat("Pod was rejected: Node didn't have enough resource: ", resource,
                       ", requested: ", requested, ", used: ", used, ", capacity: ", capacity)}}}},
      true);
}

void StandInKubelet::ReportTerminated(const json& pod, int exitCode, const std::string& reason,
                                      const std::string& message) {
  json terminated = {{"exitCode", exitCode}, {"reason", reason}, {"finishedAt", NowTime()}};
  if (!message.empty()) terminated["message"] = message;
  (void)client_->MergePatch(
      kPods, Namespace(pod), Name(pod),
      {{"status",
        {{"phase", exitCode == 0 ? "Succeeded" : "Failed"},
         {"containerStatuses", ContainerStatus(pod, {{"terminated", terminated}})}}}},
      true);
}

}  // namespace easyscale::op::testing
