// File: easyscale/device_plugin/file_inventory.h
//
// A GPU inventory read from a JSON file, for tests and for nodes without a
// driver. Every field is validated and errors name it ("devices[1].type: ...").
//
//   {"devices": [
//     {"id": "gpu0",                 // required, <= 63 chars of [A-Za-z0-9._-]
//      "type": "h200",               // required, one of common KnownGpuTypes() but "cpu"
//      "index": 0,                   // required, >= 0, unique: the CUDA index
//      "name": "NVIDIA H200",        // optional
//      "uuid": "GPU-...",            // optional, defaults to id
//      "memoryMiB": 143771,          // optional, >= 0
//      "computeCapability": "9.0",   // optional, "major.minor"
//      "numaNode": 0,                // optional, >= -1 (-1: unknown)
//      "healthy": true,              // optional, default true
//      "devicePaths": ["/dev/nvidia0"]}]}  // optional absolute paths
//
// The file health provider re-reads the file when its content changes and
// reports each device's `healthy` flag, both ways (Unhealthy can recover).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/device_plugin/gpu_device.h"
#include "easyscale/device_plugin/health_provider.h"

namespace easyscale::dp {

// `source` names the input in messages (usually the path).
StatusOr<std::vector<GpuDevice>> ParseInventory(const std::string& text, const std::string& source);
// The largest inventory file read (a node's list of GPUs is a few KB).
inline constexpr size_t kMaxInventoryFileBytes = 1 << 20;
StatusOr<std::vector<GpuDevice>> LoadInventoryFile(const std::string& path);
// The inverse of ParseInventory: {"devices": [...]} in the format above.
nlohmann::json InventoryToJson(const std::vector<GpuDevice>& devices);

// Polls `path` every `interval`; a file that stops parsing is logged and its
// last good health kept. A device missing from the new file turns Unhealthy.
std::unique_ptr<HealthProvider> MakeFileHealthProvider(std::string path,
                                                       std::chrono::milliseconds interval);

}  // namespace easyscale::dp
