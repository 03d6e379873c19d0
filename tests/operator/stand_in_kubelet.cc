// Admission, start, stop and exit of pods for tests.
#include "stand_in_kubelet.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "controller/gpu_inventory.h"
#include "easyscale/common/log.h"
#include "easyscale/operator/kube_time.h"

namespace easyscale::op::testing {

using nlohmann::json;

std::map<std::string, std::string> ResolvePodEnv(const json& pod) {
  std::map<std::string, std::string> env;
  const json& c = pod["spec"]["containers"][0];
  for (const json& e : c.value("env", json::array())) {
    const std::string name = e.value("name", "");
    if (e.contains("value")) {
      env[name] = e["value"].get<std::string>();
      continue;
    }
    const std::string path = e.value("valueFrom", json::object())
                                 .value("fieldRef", json::object())
                                 .value("fieldPath", "");
    if (path == "metadata.name") env[name] = pod["metadata"].value("name", "");
    if (path == "metadata.namespace") env[name] = pod["metadata"].value("namespace", "");
    if (path == "status.podIP") env[name] = "127.0.0.1";
  }
  return env;
}

StandInKubelet::StandInKubelet(KubeClient* client, PodRuntime* runtime)
    : client_(client), runtime_(runtime), pods_(client, kPods, {}), nodes_(client, kNodes, {}) {}

StandInKubelet::~StandInKubelet() { Stop(); }

void StandInKubelet::Start() {
  pods_.Start();
  nodes_.Start();
  thread_ = std::thread([this] { Loop(); });
}

void StandInKubelet::Stop() {
  stopped_ = true;
  if (thread_.joinable()) thread_.join();
  if (runtime_ != nullptr) {
    for (const std::string& key : started_) runtime_->Stop(key.substr(key.find('/') + 1));
  }
  started_.clear();
  pods_.Stop();
  nodes_.Stop();
}

void StandInKubelet::Loop() {
  while (!stopped_) {
    if (pods_.HasSynced() && nodes_.HasSynced()) Sync();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void StandInKubelet::Sync() {
  std::map<std::string, int> capacity;
  for (const json& n : nodes_.List()) {
    int count = 0;
    for (const auto& [type, c] : NodeGpusByType(n)) count += c;
    capacity[n["metadata"].value("name", "")] = count;
  }
  auto need = [](const json& p) {
    if (IsWorkerPod(p)) return 1;
    return IsInferencePod(p) ? InferenceGpus(p) : 0;
  };
  std::vector<json> pods = pods_.List();
  std::sort(pods.begin(), pods.end(), [](const json& a, const json& b) {
    return a["metadata"].value("creationTimestamp", "") <
           b["metadata"].value("creationTimestamp", "");
  });
  std::map<std::string, int> used;
  for (const json& p : pods) {
    const std::string phase = p["status"].value("phase", "");
    if (phase == "Running") used[p["spec"].value("nodeName", "")] += need(p);  // until it is gone
    // Terminating: stop the containers, then confirm with a grace-0 delete.
    if (p["metadata"].contains("deletionTimestamp") &&
        capacity.count(p["spec"].value("nodeName", "")) != 0) {
      if (runtime_ != nullptr && started_.erase(ObjectKey(p)) != 0) {
        runtime_->Stop(p["metadata"].value("name", ""));
      }
      (void)client_->Delete(kPods, p["metadata"].value("namespace", ""),
                            p["metadata"].value("name", ""), 0);
    }
  }
  for (auto it = started_.begin(); it != started_.end();) {
    const std::optional<json> p = pods_.Get(*it);
    if (!p.has_value()) {  // removed without a graceful phase
      if (runtime_ != nullptr) runtime_->Stop(it->substr(it->find('/') + 1));
      it = started_.erase(it);
      continue;
    }
    std::optional<int> code =
        runtime_ != nullptr ? runtime_->Exited(it->substr(it->find('/') + 1)) : std::nullopt;
    if (code.has_value()) {
      const std::string phase = *code == 0 ? "Succeeded" : "Failed";
      (void)client_->MergePatch(kPods, (*p)["metadata"].value("namespace", ""),
                                (*p)["metadata"].value("name", ""),
                                {{"status", {{"phase", phase}}}}, true);
      it = started_.erase(it);
      continue;
    }
    ++it;
  }
  for (const json& p : pods) {
    const std::string node = p["spec"].value("nodeName", "");
    if (node.empty() || capacity.count(node) == 0 || p["status"].value("phase", "") != "Pending" ||
        PodTerminated(p)) {
      continue;
    }
    if (used[node] + need(p) > capacity[node]) continue;  // waits for GPUs
    StatusOr<json> running = client_->MergePatch(
        kPods, p["metadata"].value("namespace", ""), p["metadata"].value("name", ""),
        {{"status", {{"phase", "Running"}, {"podIP", "127.0.0.1"}, {"startTime", NowTime()}}}},
        true);
    if (!running.ok()) continue;
    used[node] += need(p);
    if (IsWorkerPod(p) && runtime_ != nullptr) {
      if (Status s = runtime_->Start(*running, ResolvePodEnv(*running)); !s.ok()) {
        LogError("kubelet", "cannot start the pod's container",
                 {{"pod", ObjectKey(p)}, {"error", std::string(s.message())}});
        (void)client_->MergePatch(
            kPods, p["metadata"].value("namespace", ""), p["metadata"].value("name", ""),
            {{"status", {{"phase", "Failed"}, {"message", s.message()}}}}, true);
        continue;
      }
      started_.insert(ObjectKey(p));
    }
  }
}

}  // namespace easyscale::op::testing
