// File: easyscale/device_plugin/gpu_device.h
//
// One GPU as the device plugin knows it, whichever backend found it (NVML or an
// inventory file). `id` is what kubelet sees in ListAndWatch and Allocate; for
// NVML it is the GPU UUID, as the NVIDIA plugin does.
#pragma once

#include <string>
#include <vector>

namespace easyscale::dp {

inline constexpr const char* kDevicePluginApiVersion = "v1beta1";
inline constexpr const char* kHealthy = "Healthy";
inline constexpr const char* kUnhealthy = "Unhealthy";

struct GpuDevice {
  std::string id;    // kubelet device ID, at most 63 characters
  std::string type;  // one of common KnownGpuTypes() when recognised, e.g. "h200"
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

}  // namespace easyscale::dp
