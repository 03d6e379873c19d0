// Internal: maps a driver product name to a GPU type and reads/writes the GPU
// fields that the inventory file and the node annotation share.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "easyscale/common/json_fields.h"
#include "easyscale/device_plugin/gpu_device.h"

namespace easyscale::dp {

// "NVIDIA H200" -> "h200", "NVIDIA A100-SXM4-80GB" -> "a100": the first word of
// the name that is one of KnownGpuTypes(). Otherwise the name in lower case with
// every character outside [a-z0-9.-] turned into '-' (a valid label value).
std::string GpuTypeFromName(const std::string& name);

// A valid kubelet device ID: 1..63 characters of [A-Za-z0-9._-].
bool IsValidDeviceId(const std::string& id);

// Reads id, type, uuid, memoryMiB, computeCapability, numaNode and healthy.
// `known_type_only`: type must be a KnownGpuTypes() entry other than "cpu".
void ReadGpuFields(FieldReader& r, bool known_type_only, GpuDevice* d);
// Writes the same fields.
nlohmann::json GpuFieldsToJson(const GpuDevice& d);

}  // namespace easyscale::dp
