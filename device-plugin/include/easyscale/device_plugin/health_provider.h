// File: easyscale/device_plugin/health_provider.h
//
// A HealthProvider watches devices and reports health changes into a
// ResourceManager until stopped. Start once; Stop is safe to call twice and
// from the destructor. Backends: NVML XID events (nvml_discovery.h), an
// inventory file that is re-read on change (file_inventory.h), and the no-op
// provider for when health checks are disabled.
#pragma once

#include <memory>

#include "easyscale/common/status.h"
#include "easyscale/device_plugin/resource_manager.h"

namespace easyscale::dp {

class HealthProvider {
 public:
  virtual ~HealthProvider() = default;
  // Begins watching; `rm` must outlive Stop().
  virtual Status Start(ResourceManager* rm) = 0;
  virtual void Stop() = 0;
};

// Reports nothing: every device stays as discovered.
std::unique_ptr<HealthProvider> MakeNoopHealthProvider();

}  // namespace easyscale::dp
