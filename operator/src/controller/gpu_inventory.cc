// Nodes and Pods -> NodeGpus for the scheduler.
#include "controller/gpu_inventory.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "easyscale/common/job_spec.h"
#include "easyscale/common/log.h"

namespace easyscale::op {

using nlohmann::json;

namespace {

std::string Label(const json& obj, const char* key) {
  const json& m = obj.value("metadata", json::object());
  const json labels = m.value("labels", json::object());
  auto it = labels.find(key);
  return it != labels.end() && it->is_string() ? it->get<std::string>() : "";
}

// Sum of a resource over the containers' limits (or requests when no limit).
int ResourceCount(const json& pod, const std::string& resource) {
  int total = 0;
  const json containers = pod.value("spec", json::object()).value("containers", json::array());
  for (const json& c : containers) {
    const json res = c.is_object() ? c.value("resources", json::object()) : json::object();
    for (const char* kind : {"limits", "requests"}) {
      const json q = res.value(kind, json::object());
      auto it = q.find(resource);
      if (it == q.end()) continue;
      int n = 0;
      if (it->is_number_integer())
        n = it->get<int>();
      else if (it->is_string())
        (void)absl::SimpleAtoi(it->get<std::string>(), &n);
      total += std::max(n, 0);
      break;
    }
  }
  return total;
}

std::string PodNode(const json& pod) {
  const json spec = pod.value("spec", json::object());
  std::string node = spec.value("nodeName", "");
  if (node.empty())
    node = spec.value("nodeSelector", json::object()).value("kubernetes.io/hostname", "");
  return node;
}

std::string PodPhase(const json& pod) {
  return pod.value("status", json::object()).value("phase", "");
}
bool PodEnded(const std::string& phase) { return phase == "Succeeded" || phase == "Failed"; }

}  // namespace

NodeInventory ReadNodeInventory(const json& node) {
  NodeInventory out;
  const json spec = node.value("spec", json::object());
  if (spec.value("unschedulable", false)) return out;
  for (const json& c : node.value("status", json::object()).value("conditions", json::array())) {
    if (c.is_object() && c.value("type", "") == "Ready" && c.value("status", "") != "True") {
      return out;
    }
  }
  const json annotations = node["metadata"].value("annotations", json::object());
  if (annotations.contains(kGpusAnnotation) && annotations[kGpusAnnotation].is_string()) {
    const StatusOr<std::vector<NodeGpu>> gpus =
        ParseNodeGpus(annotations[kGpusAnnotation].get<std::string>());
    if (gpus.ok()) {
      NodeInventory fromDevices;
      for (const NodeGpu& g : *gpus) {
        if (!IsKnownGpuType(g.device.type) || !g.device.healthy) continue;
        ++fromDevices.healthy[g.device.type];
        if (g.held_by) ++fromDevices.heldByInference[g.device.type];
      }
      return fromDevices;
    }
    LogWarn("inventory", "ignoring a malformed GPU annotation; using the labels",
            {{"node", node["metadata"].value("name", "")},
             {"error", std::string(gpus.status().message())}});
  }
  const std::string type = Label(node, kGpuTypeLabel);
  int count = 0;
  if (!type.empty() && IsKnownGpuType(type) &&
      absl::SimpleAtoi(Label(node, kGpuCountLabel), &count) && count > 0) {
    out.healthy[type] = count;
  }
  return out;
}

bool IsWorkerPod(const json& pod) {
  return Label(pod, kRoleLabel) == "worker" && !Label(pod, kJobLabel).empty();
}

bool IsInferencePod(const json& pod) {
  if (IsWorkerPod(pod)) return false;
  return Label(pod, kRoleLabel) == "inference" || ResourceCount(pod, kInferenceGpuResource) > 0;
}

int InferenceGpus(const json& pod) {
  const int n = ResourceCount(pod, kInferenceGpuResource);
  return n > 0 ? n : 1;
}

bool PodTerminated(const json& pod) {
  return PodEnded(PodPhase(pod)) || pod["metadata"].contains("deletionTimestamp");
}

bool PodClaimsGpus(const json& pod) {
  const std::string phase = PodPhase(pod);
  if (PodEnded(phase)) return false;
  return phase == "Running" || !pod["metadata"].contains("deletionTimestamp");
}

std::vector<NodeGpus> BuildNodeGpus(
    const std::vector<json>& nodes, const std::vector<json>& pods,
    const std::map<std::string, std::map<std::string, int>>& unavailable) {
  std::map<std::pair<std::string, std::string>, NodeGpus> table;
  std::map<std::string, std::vector<std::string>> typesOf;  // node -> its types
  std::map<std::pair<std::string, std::string>, int> heldByPlugin;
  for (const json& n : nodes) {
    const std::string name = n["metadata"].value("name", "");
    const NodeInventory inventory = ReadNodeInventory(n);
    for (const auto& [type, count] : inventory.heldByInference) heldByPlugin[{name, type}] = count;
    for (const auto& [type, count] : inventory.healthy) {
      NodeGpus& g = table[{name, type}];
      g.node = name;
      g.gpuType = type;
      g.total = count;
      typesOf[name].push_back(type);
    }
  }
  for (const json& p : pods) {
    if (!IsInferencePod(p) || !PodClaimsGpus(p)) continue;
    const std::string node = PodNode(p);
    if (node.empty() || typesOf.count(node) == 0) continue;  // not bound to a GPU node yet
    std::string type = p.value("spec", json::object())
                           .value("nodeSelector", json::object())
                           .value(kGpuTypeLabel, "");
    const auto& types = typesOf[node];
    if (std::find(types.begin(), types.end(), type) == types.end()) type = types.front();
    NodeGpus& g = table[{node, type}];
    const bool running = PodPhase(p) == "Running";
    (running ? g.inferenceHeld : g.inferencePending) += InferenceGpus(p);
  }
  // The device plugin sees holders the pod list may not show yet (or at all).
  for (const auto& [key, count] : heldByPlugin) {
    auto it = table.find(key);
    if (it != table.end()) it->second.inferenceHeld = std::max(it->second.inferenceHeld, count);
  }
  // A GPU a draining worker still holds goes to the inference pod waiting on
  // that node (it is why the worker drains); any other is simply not idle yet.
  for (const auto& [node, byType] : unavailable) {
    for (const auto& [type, count] : byType) {
      auto it = table.find({node, type});
      if (it == table.end()) continue;
      NodeGpus& g = it->second;
      const int earmarked = std::min(count, g.inferencePending);
      g.inferencePending -= earmarked;
      g.inferenceHeld += earmarked;
      g.total = std::max(g.inferenceHeld, g.total - (count - earmarked));
    }
  }
  std::vector<NodeGpus> out;
  for (auto& [key, g] : table) out.push_back(g);
  return out;
}

std::map<std::string, GpuCounts> CountGpusByType(const std::vector<json>& nodes,
                                                 const std::vector<json>& pods) {
  std::map<std::string, GpuCounts> byType;
  std::map<std::string, int> total;
  for (const NodeGpus& n : BuildNodeGpus(nodes, pods, {})) {
    total[n.gpuType] += n.total;
    byType[n.gpuType].inference += n.inferenceHeld;
  }
  for (const json& p : pods) {
    if (IsWorkerPod(p) && PodClaimsGpus(p) && !PodNode(p).empty()) {
      ++byType[Label(p, kGpuTypeLabel)].training;
    }
  }
  for (auto& [type, c] : byType) c.idle = std::max(0, total[type] - c.inference - c.training);
  return byType;
}

}  // namespace easyscale::op
