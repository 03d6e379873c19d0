// File: easyscale/device_plugin/node_inventory.h
//
// Which pods hold the plugin's GPUs, joined onto the inventory for the node
// annotation (format, writer and parser: easyscale/common/node_inventory.h).
// Device IDs from pod-resources are matched against both `id` and `uuid`,
// because the NVIDIA plugin advertises UUIDs and may be configured to indices.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "easyscale/common/node_inventory.h"
#include "easyscale/device_plugin/gpu_device.h"

namespace easyscale::dp {

// Who holds which device, keyed by device ID (as kubelet reports it).
struct DeviceHolders {
  std::map<std::string, std::string> inference;  // device id -> "ns/pod"
  std::map<std::string, std::string> training;

  bool operator==(const DeviceHolders&) const = default;
};

// Joins the inventory with the holders (matching on id or uuid).
std::vector<NodeGpu> JoinHolders(const std::vector<GpuDevice>& devices,
                                 const DeviceHolders& holders);

}  // namespace easyscale::dp
