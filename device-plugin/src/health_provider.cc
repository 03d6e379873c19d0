#include "easyscale/device_plugin/health_provider.h"

namespace easyscale::dp {
namespace {

class NoopHealthProvider : public HealthProvider {
 public:
  Status Start(ResourceManager*) override { return absl::OkStatus(); }
  void Stop() override {}
};

}  // namespace

std::unique_ptr<HealthProvider> MakeNoopHealthProvider() {
  return std::make_unique<NoopHealthProvider>();
}

}  // namespace easyscale::dp
