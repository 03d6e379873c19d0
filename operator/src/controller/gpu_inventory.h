// File: operator/src/controller/gpu_inventory.h
//
// What GPUs the cluster has and who holds them, from the typed views of Nodes
// and Pods (cluster_objects.h): a Node offers its healthy GPUs by type; an
// inference Pod holds GPUs once Running (until it has ended or gone, even
// while being deleted) and wants them while Pending on a node; training worker
// Pods belong to jobs.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "controller/cluster_objects.h"
#include "easyscale/operator/scheduler.h"

namespace easyscale::op {

// For callers that hold raw objects (the stand-in kubelet, tests).
inline std::map<std::string, int> NodeGpusByType(const nlohmann::json& node) {
  return ReadNodeInventory(node).healthy;
}
inline bool IsWorkerPod(const nlohmann::json& pod) {
  return ParsePod(pod).role == PodRole::kWorker;
}
inline bool IsInferencePod(const nlohmann::json& pod) {
  return ParsePod(pod).role == PodRole::kInference;
}
inline int InferenceGpus(const nlohmann::json& pod) { return ParsePod(pod).inferenceGpus; }
inline bool PodTerminated(const nlohmann::json& pod) { return ParsePod(pod).Terminated(); }

// GPU counts keyed by node, then type.
using GpusByNodeAndType = std::map<std::string, std::map<std::string, int>>;

// Per node and GPU type: totals, inference held (Running inference pods, or
// the device plugin's heldBy when it sees more) and pending. `unavailable`
// counts GPUs still held by training pods outside any job's plan (draining
// workers): they count as the pending inference's when it waits on that node,
// else as not idle, so no new placement takes them; but they never cut the
// total below what inference and the jobs' planned workers (`planned`) hold
// there, so they alone never make the scheduler preempt.
std::vector<NodeGpus> BuildNodeGpus(const std::vector<NodePtr>& nodes,
                                    const std::vector<PodPtr>& pods,
                                    const GpusByNodeAndType& unavailable,
                                    const GpusByNodeAndType& planned);

struct GpuCounts {
  int idle = 0;
  int training = 0;   // held by worker pods (those draining too)
  int inference = 0;  // held by inference
};

// The cluster's GPUs by type and state, as the pods hold them now.
std::map<std::string, GpuCounts> CountGpusByType(const std::vector<NodePtr>& nodes,
                                                 const std::vector<PodPtr>& pods);

}  // namespace easyscale::op
