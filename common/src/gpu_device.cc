#include "easyscale/common/gpu_device.h"

#include <regex>

#include "easyscale/common/job_spec.h"

namespace easyscale {

bool IsValidDeviceId(const std::string& id) {
  static const std::regex kId("[A-Za-z0-9._-]{1,63}");
  return std::regex_match(id, kId);
}

void ReadGpuFields(FieldReader& r, bool known_type_only, GpuDevice* d) {
  r.String("id", &d->id, /*required=*/true);
  if (r.ok() && !IsValidDeviceId(d->id)) {
    r.Fail("id", "must be 1..63 characters of [A-Za-z0-9._-], got \"" + d->id + "\"");
  }
  if (known_type_only) {
    std::vector<std::string> gpu_types;
    for (const auto& t : KnownGpuTypes()) {
      if (t != "cpu") gpu_types.push_back(t);
    }
    r.Enum("type", &d->type, gpu_types, /*required=*/true);
  } else {
    r.String("type", &d->type, /*required=*/true);
  }
  d->uuid = d->id;
  r.String("uuid", &d->uuid);
  r.Int("memoryMiB", &d->memory_mib, false, 0);
  r.String("computeCapability", &d->compute_capability);
  static const std::regex kCapability("([0-9]+\\.[0-9]+)?");
  if (r.ok() && !std::regex_match(d->compute_capability, kCapability)) {
    r.Fail("computeCapability", "must be \"major.minor\", got \"" + d->compute_capability + "\"");
  }
  r.Int("numaNode", &d->numa_node, false, -1);
  r.Bool("healthy", &d->healthy);
}

nlohmann::json GpuFieldsToJson(const GpuDevice& d) {
  return {{"id", d.id},
          {"type", d.type},
          {"uuid", d.uuid},
          {"memoryMiB", d.memory_mib},
          {"computeCapability", d.compute_capability},
          {"numaNode", d.numa_node},
          {"healthy", d.healthy}};
}

}  // namespace easyscale
