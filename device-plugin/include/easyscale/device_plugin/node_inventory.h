// File: easyscale/device_plugin/node_inventory.h
//
// What the device plugin publishes on its Node object for the operator: the
// GPU inventory with types, and which GPUs pods hold. Written with one JSON
// merge patch on /api/v1/nodes/NAME (or, with --publish-file, the same patch
// written to a file):
//
//   {"metadata": {
//     "labels": {
//       "easyscale.io/gpu-type": "h200",   // the one type of every GPU; "mixed" when
//                                          // types differ; "none" when there are no GPUs
//       "easyscale.io/gpu-count": "8"},    // number of healthy GPUs (decimal): what the
//                                          // node offers when the annotation is unreadable
//     "annotations": {
//       "easyscale.io/gpus": "<JSON text of the list below>"}}}
//
// The annotation value is a JSON array, one object per GPU in driver-index order:
//   [{"id": "GPU-8f...",               // the kubelet device ID of easyscale.io/gpu
//     "type": "h200",                  // see gpu_type.h (KnownGpuTypes() when recognised)
//     "uuid": "GPU-8f...",
//     "memoryMiB": 143771,             // integer
//     "computeCapability": "9.0",      // "major.minor", "" when unknown
//     "numaNode": 0,                   // integer, -1 when unknown
//     "healthy": true,
//     "heldBy": "serving/llm-0",       // "namespace/pod" of an inference pod holding
//                                      // it (resource nvidia.com/gpu, or another
//                                      // --inference-resource), or null when none
//     "trainingPod": "jobs/mnist-w1"}] // "namespace/pod" holding it through
//                                      // easyscale.io/gpu, or null
// Idle GPUs for training are the healthy ones with heldBy null. Parsers must
// ignore unknown fields so the format can grow.
//
// Device IDs from pod-resources are matched against both `id` and `uuid`,
// because the NVIDIA plugin advertises UUIDs and may be configured to indices.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/device_plugin/gpu_device.h"

namespace easyscale::dp {

inline constexpr const char* kGpusAnnotation = "easyscale.io/gpus";
inline constexpr const char* kGpuTypeLabel = "easyscale.io/gpu-type";
inline constexpr const char* kGpuCountLabel = "easyscale.io/gpu-count";

struct NodeGpu {
  GpuDevice device;
  std::optional<std::string> held_by;       // inference pod "ns/pod"
  std::optional<std::string> training_pod;  // easyscale.io/gpu pod "ns/pod"

  bool operator==(const NodeGpu&) const = default;
};

// Who holds which device, keyed by device ID (as kubelet reports it).
struct DeviceHolders {
  std::map<std::string, std::string> inference;  // device id -> "ns/pod"
  std::map<std::string, std::string> training;

  bool operator==(const DeviceHolders&) const = default;
};

// Joins the inventory with the holders (matching on id or uuid).
std::vector<NodeGpu> JoinHolders(const std::vector<GpuDevice>& devices,
                                 const DeviceHolders& holders);

// The annotation value (a JSON array) and the merge patch around it.
nlohmann::json NodeGpusToJson(const std::vector<NodeGpu>& gpus);
nlohmann::json NodeInventoryPatch(const std::vector<NodeGpu>& gpus);

// Parses an annotation value; errors name the field ("[2].numaNode: ...").
StatusOr<std::vector<NodeGpu>> ParseNodeGpus(const std::string& annotation_value);

}  // namespace easyscale::dp
