// File: easyscale/common/node_inventory.h
//
// What the device plugin publishes on its Node object for the operator: the
// GPU inventory with types, and which GPUs pods hold. The plugin writes it
// with one JSON merge patch on /api/v1/nodes/NAME (or, with --publish-file,
// the same patch written to a file); the operator parses the annotation:
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
//     "type": "h200",                  // KnownGpuTypes() entry when recognised
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
// Only id and type are required. Idle GPUs for training are the healthy ones
// with heldBy null. Parsers must ignore unknown fields so the format can grow.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "easyscale/common/gpu_device.h"
#include "easyscale/common/status.h"

namespace easyscale {

inline constexpr const char* kGpusAnnotation = "easyscale.io/gpus";
inline constexpr const char* kGpuTypeLabel = "easyscale.io/gpu-type";
inline constexpr const char* kGpuCountLabel = "easyscale.io/gpu-count";

struct NodeGpu {
  GpuDevice device;
  std::optional<std::string> held_by;       // inference pod "ns/pod"
  std::optional<std::string> training_pod;  // easyscale.io/gpu pod "ns/pod"

  bool operator==(const NodeGpu&) const = default;
};

// The annotation value (a JSON array) and the merge patch around it.
nlohmann::json NodeGpusToJson(const std::vector<NodeGpu>& gpus);
nlohmann::json NodeInventoryPatch(const std::vector<NodeGpu>& gpus);

// Parses an annotation value; errors name the field ("[2].numaNode: ...").
StatusOr<std::vector<NodeGpu>> ParseNodeGpus(const std::string& annotation_value);

}  // namespace easyscale
