// File: operator/src/controller/gpu_inventory.h
//
// What GPUs the cluster has and who holds them, read from Nodes and Pods:
//  - a Node offers GPUs by type: the device plugin's `easyscale.io/gpus`
//    annotation (a JSON list of devices) when valid, else the label pair
//    easyscale.io/gpu-type + easyscale.io/gpu-count (the minimum it publishes);
//  - an inference Pod (labelled easyscale.io/role=inference, or requesting
//    nvidia.com/gpu) holds GPUs once Running (until it has ended or gone, even
//    while being deleted) and wants them while Pending on a node; training
//    worker Pods (easyscale.io/role=worker) belong to jobs.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/node_inventory.h"
#include "easyscale/operator/scheduler.h"

namespace easyscale::op {

inline constexpr const char* kRoleLabel = "easyscale.io/role";
inline constexpr const char* kJobLabel = "easyscale.io/job";
inline constexpr const char* kGenerationLabel = "easyscale.io/generation";
inline constexpr const char* kInferenceGpuResource = "nvidia.com/gpu";

struct NodeInventory {
  std::map<std::string, int> healthy;          // by GPU type
  std::map<std::string, int> heldByInference;  // healthy ones the annotation marks heldBy
};

// Healthy GPUs of a node by type; empty when the node is not schedulable
// (spec.unschedulable, or a Ready condition that is not True). Devices of
// types the operator does not know are left out.
NodeInventory ReadNodeInventory(const nlohmann::json& node);
inline std::map<std::string, int> NodeGpusByType(const nlohmann::json& node) {
  return ReadNodeInventory(node).healthy;
}

bool IsWorkerPod(const nlohmann::json& pod);
bool IsInferencePod(const nlohmann::json& pod);
// GPUs an inference pod holds or wants (its nvidia.com/gpu request; 1 when it
// is only labelled).
int InferenceGpus(const nlohmann::json& pod);
bool PodTerminated(const nlohmann::json& pod);  // Succeeded, Failed or being deleted
// Holds its GPUs or waits for them: not Succeeded or Failed, and Running or not
// being deleted (a pod being deleted runs until the kubelet has stopped it).
bool PodClaimsGpus(const nlohmann::json& pod);

// Per node and GPU type: totals, inference held (Running inference pods, or
// the device plugin's heldBy when it sees more) and pending. `unavailable`
// counts GPUs still held by training pods outside any job's plan (draining
// workers), keyed by node then type: they count as the pending inference's
// when it waits on that node, else as not idle.
std::vector<NodeGpus> BuildNodeGpus(
    const std::vector<nlohmann::json>& nodes, const std::vector<nlohmann::json>& pods,
    const std::map<std::string, std::map<std::string, int>>& unavailable);

struct GpuCounts {
  int idle = 0;
  int training = 0;   // held by worker pods (those draining too)
  int inference = 0;  // held by inference
};

// The cluster's GPUs by type and state, as the pods hold them now.
std::map<std::string, GpuCounts> CountGpusByType(const std::vector<nlohmann::json>& nodes,
                                                 const std::vector<nlohmann::json>& pods);

}  // namespace easyscale::op
