#include "nvml_discovery.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "gpu_type.h"

namespace easyscale::dp {

int NumaNodeOfPciBusId(const std::string& bus_id, const std::string& sysfs_root) {
  // NVML pads the PCI domain to 8 hex digits; sysfs uses 4 ("0000:19:00.0").
  std::string id = bus_id.substr(0, bus_id.find('\0'));
  if (id.size() > 12) id = id.substr(id.size() - 12);
  std::transform(id.begin(), id.end(), id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto text = ReadFile(sysfs_root + "/" + id + "/numa_node", 4096);
  if (!text.ok()) return -1;
  try {
    return std::max(-1, std::stoi(*text));
  } catch (const std::exception&) {
    return -1;
  }
}

StatusOr<NvmlInventory> DiscoverNvmlGpus(const nvml::Library& lib) {
  NvmlInventory inv;
  char version[96] = {};
  if (lib.SystemGetDriverVersion != nullptr &&
      lib.SystemGetDriverVersion(version, sizeof(version)) == nvml::kSuccess) {
    inv.driver_version = version;
  }
  unsigned int count = 0;
  ES_RETURN_IF_ERROR(lib.Check(lib.DeviceGetCount(&count), "nvmlDeviceGetCount"));
  for (unsigned int i = 0; i < count; ++i) {
    nvml::Device dev = nullptr;
    ES_RETURN_IF_ERROR(lib.Check(lib.DeviceGetHandleByIndex(i, &dev),
                                 absl::StrCat("nvmlDeviceGetHandleByIndex(", i, ")").c_str()));
    GpuDevice d;
    d.index = static_cast<int>(i);
    char name[96] = {};
    char uuid[96] = {};
    ES_RETURN_IF_ERROR(lib.Check(lib.DeviceGetName(dev, name, sizeof(name)), "nvmlDeviceGetName"));
    ES_RETURN_IF_ERROR(lib.Check(lib.DeviceGetUUID(dev, uuid, sizeof(uuid)), "nvmlDeviceGetUUID"));
    d.name = name;
    d.uuid = uuid;
    d.id = uuid;
    d.type = GpuTypeFromName(d.name);
    nvml::Memory mem{};
    if (lib.DeviceGetMemoryInfo(dev, &mem) == nvml::kSuccess) {
      d.memory_mib = static_cast<int64_t>(mem.total / (1024ULL * 1024ULL));
    }
    int major = 0;
    int minor = 0;
    if (lib.DeviceGetCudaComputeCapability(dev, &major, &minor) == nvml::kSuccess) {
      d.compute_capability = absl::StrCat(major, ".", minor);
    }
    nvml::PciInfo pci{};
    if (lib.DeviceGetPciInfo != nullptr && lib.DeviceGetPciInfo(dev, &pci) == nvml::kSuccess) {
      d.numa_node = NumaNodeOfPciBusId(pci.bus_id, "/sys/bus/pci/devices");
    }
    unsigned int minor_number = 0;
    if (lib.DeviceGetMinorNumber != nullptr &&
        lib.DeviceGetMinorNumber(dev, &minor_number) == nvml::kSuccess) {
      d.device_paths.push_back(absl::StrCat("/dev/nvidia", minor_number));
    }
    if (!IsValidDeviceId(d.id)) {
      return absl::InternalError(absl::StrCat("GPU ", i, " has an unusable UUID \"", d.id, "\""));
    }
    inv.devices.push_back(std::move(d));
  }
  return inv;
}

}  // namespace easyscale::dp
