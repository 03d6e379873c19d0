// File: easyscale/common/gpu_device.h
//
// One GPU as the device plugin knows it, whichever backend found it (NVML or an
// inventory file), and the JSON fields that the plugin's inventory file and the
// node annotation (node_inventory.h) share. `id` is what kubelet sees in
// ListAndWatch and Allocate; for NVML it is the GPU UUID, as the NVIDIA plugin
// does.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/json_fields.h"

namespace easyscale {

struct GpuDevice {
  std::string id;    // kubelet device ID, at most 63 characters
  std::string type;  // one of KnownGpuTypes() when recognised, e.g. "h200"
  std::string name;  // the driver's product name, e.g. "NVIDIA H200"
  std::string uuid;  // "GPU-..." as nvidia-smi prints it
  int index = 0;     // driver index: the value of CUDA/NVIDIA_VISIBLE_DEVICES
  int64_t memory_mib = 0;
  std::string compute_capability;  // "major.minor", e.g. "9.0"
  int numa_node = -1;              // -1: unknown or no NUMA affinity
  bool healthy = true;
  std::string health_reason;              // why it is unhealthy; empty when healthy
  std::vector<std::string> device_paths;  // host device nodes, e.g. /dev/nvidia0

  bool operator==(const GpuDevice&) const = default;
};

// A valid kubelet device ID: 1..63 characters of [A-Za-z0-9._-].
bool IsValidDeviceId(const std::string& id);

// Reads id, type, uuid, memoryMiB, computeCapability, numaNode and healthy.
// `known_type_only`: type must be a KnownGpuTypes() entry other than "cpu".
void ReadGpuFields(FieldReader& r, bool known_type_only, GpuDevice* d);
// Writes the same fields.
nlohmann::json GpuFieldsToJson(const GpuDevice& d);

}  // namespace easyscale
