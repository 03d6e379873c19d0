// Internal: maps a driver product name to a GPU type. The GPU fields the
// inventory file and the node annotation share are in common/gpu_device.h.
#pragma once

#include <string>

#include "easyscale/common/gpu_device.h"

namespace easyscale::dp {

// "NVIDIA H200" -> "h200", "NVIDIA A100-SXM4-80GB" -> "a100": the first word of
// the name that is one of KnownGpuTypes(). Otherwise the name in lower case with
// every character outside [a-z0-9.-] turned into '-' (a valid label value).
std::string GpuTypeFromName(const std::string& name);

}  // namespace easyscale::dp
