// File: easyscale/device_plugin/gpu_device.h
//
// The kubelet Device Plugin API's constants; the GpuDevice record itself is
// shared with the operator (easyscale/common/gpu_device.h).
#pragma once

#include "easyscale/common/gpu_device.h"

namespace easyscale::dp {

inline constexpr const char* kDevicePluginApiVersion = "v1beta1";
inline constexpr const char* kHealthy = "Healthy";
inline constexpr const char* kUnhealthy = "Unhealthy";

}  // namespace easyscale::dp
