// Internal: GPU discovery and XID health through NVML (nvml_api.h).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/device_plugin/gpu_device.h"
#include "easyscale/device_plugin/health_provider.h"
#include "nvml_api.h"

namespace easyscale::dp {

struct NvmlInventory {
  std::string driver_version;
  std::vector<GpuDevice> devices;  // id = UUID, index = NVML index
};

// Name, UUID, memory, compute capability, NUMA node (from sysfs, by PCI bus ID)
// and the /dev/nvidiaN node of every GPU the driver lists.
StatusOr<NvmlInventory> DiscoverNvmlGpus(const nvml::Library& lib);

// "00000000:19:00.0" -> the numa_node file of /sys/bus/pci/devices/0000:19:00.0;
// -1 when unknown.
int NumaNodeOfPciBusId(const std::string& bus_id, const std::string& sysfs_root);

// Critical XID events make a device Unhealthy; after `recovery_quiet` without a
// new critical XID, and if the device still answers a memory query, it is
// Healthy again. Devices without event support are left as they are.
std::unique_ptr<HealthProvider> MakeNvmlHealthProvider(std::shared_ptr<nvml::Library> lib,
                                                       std::chrono::seconds recovery_quiet);

}  // namespace easyscale::dp
