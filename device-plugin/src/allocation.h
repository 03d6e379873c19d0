// Internal: the two allocation decisions of the kubelet layer, as pure
// functions over device snapshots so they can be tested without gRPC.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/device_plugin/gpu_device.h"

namespace easyscale::dp {

// Chooses `size` devices out of `available` (IDs), always including
// `must_include`. Prefers devices of one type on one NUMA node: the group of the
// first must-include device if it has room, else the smallest (type, NUMA)
// group that fits the whole request (keeps big groups whole for big requests),
// else one type across NUMA nodes, else driver-index order. `inventory` gives
// each ID its type and NUMA node; unknown IDs are an InvalidArgument.
StatusOr<std::vector<std::string>> PreferredAllocation(const std::vector<GpuDevice>& inventory,
                                                       const std::vector<std::string>& available,
                                                       const std::vector<std::string>& must_include,
                                                       int size);

struct DeviceNode {
  std::string path;
  std::string permissions;
};

struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<DeviceNode> devices;
  std::map<std::string, std::string> annotations;
};

// The container side of `devices`: NVIDIA_VISIBLE_DEVICES and
// CUDA_VISIBLE_DEVICES as UUIDs (both the NVIDIA runtime and CUDA accept
// them, and they stay right after the runtime renumbers devices), the GPU type,
// each GPU's device nodes plus the driver control nodes, and annotations.
ContainerAllocation BuildAllocation(const std::vector<GpuDevice>& devices,
                                    const std::vector<std::string>& control_device_paths);

}  // namespace easyscale::dp
