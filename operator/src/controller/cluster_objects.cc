// Raw Pods, Nodes and EasyScaleJobs -> the controller's typed views.
#include "controller/cluster_objects.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "easyscale/common/log.h"
#include "easyscale/operator/kube_client.h"

namespace easyscale::op {

using nlohmann::json;

namespace {

// A string field of an object, "" when absent or not a string.
std::string StringAt(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

const json& ObjectAt(const json& obj, const char* key) {
  static const json kEmpty = json::object();
  if (!obj.is_object()) return kEmpty;
  auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? *it : kEmpty;
}

// Sum of a resource over the containers' limits (or requests when no limit).
int ResourceCount(const json& spec, const std::string& resource) {
  int total = 0;
  auto containers = spec.find("containers");
  if (containers == spec.end() || !containers->is_array()) return 0;
  for (const json& c : *containers) {
    const json& res = ObjectAt(c, "resources");
    for (const char* kind : {"limits", "requests"}) {
      const json& q = ObjectAt(res, kind);
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

PodPhase ParsePodPhase(const std::string& phase) {
  if (phase == "Pending" || phase.empty()) return PodPhase::kPending;
  if (phase == "Running") return PodPhase::kRunning;
  if (phase == "Succeeded") return PodPhase::kSucceeded;
  if (phase == "Failed") return PodPhase::kFailed;
  return PodPhase::kUnknown;
}

std::optional<ContainerExit> FirstContainerExit(const json& status) {
  auto statuses = status.find("containerStatuses");
  if (statuses == status.end() || !statuses->is_array() || statuses->empty()) return std::nullopt;
  const json& terminated = ObjectAt(ObjectAt((*statuses)[0], "state"), "terminated");
  auto code = terminated.find("exitCode");
  if (code == terminated.end() || !code->is_number_integer()) return std::nullopt;
  return ContainerExit{code->get<int>(), StringAt(terminated, "reason")};
}

int64_t IntLabel(const json& labels, const char* key) {
  int64_t v = 0;
  return absl::SimpleAtoi(StringAt(labels, key), &v) ? v : 0;
}

}  // namespace

PodView ParsePod(const json& pod) {
  PodView v;
  const json& meta = ObjectAt(pod, "metadata");
  const json& labels = ObjectAt(meta, "labels");
  const json& spec = ObjectAt(pod, "spec");
  const json& status = ObjectAt(pod, "status");
  v.ns = StringAt(meta, "namespace");
  v.name = StringAt(meta, "name");
  v.key = v.ns.empty() ? v.name : v.ns + "/" + v.name;
  v.phase = ParsePodPhase(StringAt(status, "phase"));
  v.deleting = meta.contains("deletionTimestamp");
  v.boundNode = StringAt(spec, "nodeName");
  const json& selector = ObjectAt(spec, "nodeSelector");
  v.node = v.boundNode.empty() ? StringAt(selector, "kubernetes.io/hostname") : v.boundNode;
  v.gpuTypeSelector = StringAt(selector, kGpuTypeLabel);
  const std::string role = StringAt(labels, kRoleLabel);
  v.job = StringAt(labels, kJobLabel);
  const int requested = ResourceCount(spec, kInferenceGpuResource);
  if (role == "worker" && !v.job.empty()) {
    v.role = PodRole::kWorker;
    v.generation = IntLabel(labels, kGenerationLabel);
    v.gpuType = StringAt(labels, kGpuTypeLabel);
    auto refs = meta.find("ownerReferences");
    if (refs != meta.end() && refs->is_array()) {
      for (const json& ref : *refs) {
        if (ref.is_object() && ref.value("controller", false)) v.ownerUid = StringAt(ref, "uid");
      }
    }
  } else if (role == "inference" || requested > 0) {
    v.role = PodRole::kInference;
    v.inferenceGpus = requested > 0 ? requested : 1;
  }
  if (v.role != PodRole::kWorker) v.job.clear();
  v.exit = FirstContainerExit(status);
  auto containers = status.find("containerStatuses");
  const bool started = containers != status.end() && containers->is_array() && !containers->empty();
  if (v.phase == PodPhase::kFailed && !started) {
    v.rejectedReason = StringAt(status, "reason");
    v.rejectedMessage = StringAt(status, "message");
  }
  auto conditions = status.find("conditions");
  if (conditions != status.end() && conditions->is_array()) {
    for (const json& c : *conditions) {
      if (c.is_object() && StringAt(c, "type") == "DisruptionTarget" &&
          StringAt(c, "status") == "True") {
        v.disruptionReason = StringAt(c, "reason");
        if (v.disruptionReason.empty()) v.disruptionReason = "DisruptionTarget";
      }
    }
  }
  return v;
}

NodeInventory ReadNodeInventory(const json& node) {
  NodeInventory out;
  if (ObjectAt(node, "spec").value("unschedulable", false)) return out;
  const json& status = ObjectAt(node, "status");
  auto conditions = status.find("conditions");
  if (conditions != status.end() && conditions->is_array()) {
    for (const json& c : *conditions) {
      if (StringAt(c, "type") == "Ready" && StringAt(c, "status") != "True") return out;
    }
  }
  const json& meta = ObjectAt(node, "metadata");
  const json& annotations = ObjectAt(meta, "annotations");
  auto devices = annotations.find(kGpusAnnotation);
  if (devices != annotations.end() && devices->is_string()) {
    const StatusOr<std::vector<NodeGpu>> gpus = ParseNodeGpus(devices->get<std::string>());
    if (gpus.ok()) {
      for (const NodeGpu& g : *gpus) {
        if (!IsKnownGpuType(g.device.type) || !g.device.healthy) continue;
        ++out.healthy[g.device.type];
        if (!g.held_by) continue;
        ++out.heldByInference[g.device.type];
        if (g.training_pod) out.workersBesideInference.insert(*g.training_pod);
      }
      return out;
    }
    LogWarn("inventory", "ignoring a malformed GPU annotation; using the labels",
            {{"node", StringAt(meta, "name")}, {"error", std::string(gpus.status().message())}});
  }
  const json& labels = ObjectAt(meta, "labels");
  const std::string type = StringAt(labels, kGpuTypeLabel);
  int count = 0;
  if (!type.empty() && IsKnownGpuType(type) &&
      absl::SimpleAtoi(StringAt(labels, kGpuCountLabel), &count) && count > 0) {
    out.healthy[type] = count;
  }
  return out;
}

NodeView ParseNode(const json& node) {
  return {StringAt(ObjectAt(node, "metadata"), "name"), ReadNodeInventory(node)};
}

JobView ParseJob(json job) {
  JobView v;
  const json& meta = ObjectAt(job, "metadata");
  v.ns = StringAt(meta, "namespace");
  v.name = StringAt(meta, "name");
  v.key = v.ns + "/" + v.name;
  v.uid = StringAt(meta, "uid");
  v.metadataGeneration = meta.value("generation", int64_t{1});
  (void)absl::SimpleAtoi(StringAt(meta, "resourceVersion"), &v.resourceVersion);
  v.creationTimestamp = StringAt(meta, "creationTimestamp");
  v.deleting = meta.contains("deletionTimestamp");
  v.queueName = StringAt(ObjectAt(meta, "labels"), kQueueNameLabel);
  auto finalizers = meta.find("finalizers");
  if (finalizers != meta.end() && finalizers->is_array()) {
    v.hasFinalizer = std::find(finalizers->begin(), finalizers->end(), json(kCleanupFinalizer)) !=
                     finalizers->end();
  }
  v.spec = ParseJobSpec(job.value("spec", json()), "spec");
  if (v.spec.ok() && v.spec->maxWorkers == 0) v.spec->maxWorkers = v.spec->ests;
  v.status = ParseJobStatus(job.value("status", json()));
  v.object = std::move(job);
  return v;
}

}  // namespace easyscale::op
