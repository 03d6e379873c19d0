// File: operator/src/controller/cluster_objects.h
//
// Typed views of the objects the controller reads: a Pod, a Node and an
// EasyScaleJob, each parsed once where it enters the controller (the informer
// handlers, our own writes, a list from the API server). The controller's
// logic reads these fields, never the raw JSON; the raw object is kept only
// where it goes back to the API server (updates, owner references, Events).
//   PodView p = ParsePod(obj);
//   if (p.role == PodRole::kWorker && p.Terminated()) ...
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controller/job_status.h"
#include "easyscale/common/job_spec.h"
#include "easyscale/common/node_inventory.h"
#include "easyscale/common/status.h"

namespace easyscale::op {

inline constexpr const char* kRoleLabel = "easyscale.io/role";
inline constexpr const char* kJobLabel = "easyscale.io/job";
inline constexpr const char* kGenerationLabel = "easyscale.io/generation";
inline constexpr const char* kInferenceGpuResource = "nvidia.com/gpu";
inline constexpr const char* kCleanupFinalizer = "easyscale.io/cleanup";
// Kueue's label: the LocalQueue a job waits in, created with spec.suspend
// true, until Kueue admits it by setting spec.suspend to false.
inline constexpr const char* kQueueNameLabel = "kueue.x-k8s.io/queue-name";

enum class PodRole { kOther, kWorker, kInference };
enum class PodPhase { kPending, kRunning, kSucceeded, kFailed, kUnknown };

struct ContainerExit {
  int code = 0;
  std::string reason;  // the kubelet's, e.g. Error, OOMKilled
  bool operator==(const ContainerExit&) const = default;
};

struct PodView {
  std::string key;  // namespace/name
  std::string ns;
  std::string name;
  PodRole role = PodRole::kOther;
  PodPhase phase = PodPhase::kPending;
  bool deleting = false;  // has a deletionTimestamp
  std::string boundNode;  // spec.nodeName
  std::string node;       // spec.nodeName, else its kubernetes.io/hostname selector
  // Workers: the job label, the owning job's UID (controller reference), the
  // generation label and GPU type label.
  std::string job;
  std::string ownerUid;
  int64_t generation = 0;
  std::string gpuType;
  std::string gpuTypeSelector;        // inference: its easyscale.io/gpu-type node selector
  int inferenceGpus = 0;              // inference: GPUs it holds or wants
  std::optional<ContainerExit> exit;  // the first container's end, once it ended
  // Failed before any container started, as kubelet's admission rejects a
  // bound pod it has no room for (reason OutOf<resource>, or another of its
  // admission reasons): status.reason and message; empty otherwise.
  std::string rejectedReason;
  std::string rejectedMessage;
  // The cluster ended the pod, not the pod itself: kube's DisruptionTarget
  // condition (EvictionByEvictionAPI from kubectl drain or the autoscaler,
  // PreemptionByScheduler, DeletionByTaintManager, TerminationByKubelet...),
  // its reason; empty otherwise. Like a Job's podFailurePolicy with
  // DisruptionTarget: Ignore, such a loss is no failure of the job.
  std::string disruptionReason;

  std::string JobKey() const { return ns + "/" + job; }
  bool Ended() const { return phase == PodPhase::kSucceeded || phase == PodPhase::kFailed; }
  // Ended or being deleted.
  bool Terminated() const { return Ended() || deleting; }
  // Holds its GPUs or waits for them: not ended, and running or not being
  // deleted (a pod being deleted runs until the kubelet has stopped it).
  bool ClaimsGpus() const { return !Ended() && (phase == PodPhase::kRunning || !deleting); }
  bool Rejected() const { return !rejectedReason.empty(); }
  bool Disrupted() const { return !disruptionReason.empty(); }
  bool operator==(const PodView&) const = default;
};

// A worker pod is labelled easyscale.io/role=worker with its job; an inference
// pod is labelled easyscale.io/role=inference or requests nvidia.com/gpu (it
// holds its request, 1 when it is only labelled).
PodView ParsePod(const nlohmann::json& pod);

struct NodeInventory {
  std::map<std::string, int> healthy;          // by GPU type
  std::map<std::string, int> heldByInference;  // healthy ones the annotation marks heldBy
  // Worker pods ("ns/pod") on a GPU that the annotation marks heldBy too: the
  // NVIDIA plugin, which knows nothing of our workers, gave inference their GPU.
  std::set<std::string> workersBesideInference;
  bool operator==(const NodeInventory&) const = default;
};

// Healthy GPUs of a node by type: the device plugin's `easyscale.io/gpus`
// annotation (a JSON list of devices) when valid, else the label pair
// easyscale.io/gpu-type + easyscale.io/gpu-count (the minimum it publishes);
// empty when the node is not schedulable (spec.unschedulable, or a Ready
// condition that is not True). Devices of types the operator does not know
// are left out.
NodeInventory ReadNodeInventory(const nlohmann::json& node);

struct NodeView {
  std::string name;
  NodeInventory inventory;  // empty when not schedulable
  bool operator==(const NodeView&) const = default;
};

NodeView ParseNode(const nlohmann::json& node);

struct JobView {
  std::string key;  // namespace/name
  std::string ns;
  std::string name;
  std::string uid;
  int64_t metadataGeneration = 1;
  int64_t resourceVersion = 0;
  std::string creationTimestamp;
  bool deleting = false;
  bool hasFinalizer = false;  // easyscale.io/cleanup
  std::string queueName;      // kueue.x-k8s.io/queue-name; empty: not queued by Kueue
  StatusOr<JobSpec> spec = JobSpec{};
  StatusOr<JobStatus> status = JobStatus{};
  nlohmann::json object;  // as read: for updates, owner references and Events
};

JobView ParseJob(nlohmann::json job);

using PodPtr = std::shared_ptr<const PodView>;
using NodePtr = std::shared_ptr<const NodeView>;
using JobPtr = std::shared_ptr<const JobView>;

}  // namespace easyscale::op
