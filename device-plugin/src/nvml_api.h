// Internal: the part of the NVML C API the plugin uses, loaded at run time with
// dlopen so the binary starts on nodes without a driver. Types and constants are
// those of nvml.h (a stable C ABI); only the entry points we call are bound.
#pragma once

#include <memory>
#include <string>

#include "easyscale/common/status.h"

namespace easyscale::dp::nvml {

using Return = int;  // nvmlReturn_t
using Device = struct DeviceOpaque*;
using EventSet = struct EventSetOpaque*;

inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorTimeout = 10;
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x8ULL;

struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct PciInfo {  // nvmlPciInfo_t (v3)
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

struct EventData {  // nvmlEventData_t
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

// A loaded and initialised NVML; nvmlShutdown on destruction.
class Library {
 public:
  // dlopen(`path`) and nvmlInit_v2. Unavailable (with the dlerror text) when the
  // library is missing, FailedPrecondition when it loads but cannot initialise.
  static StatusOr<std::unique_ptr<Library>> Load(const std::string& path);
  ~Library();

  // The NVML error text for `r`, e.g. "Not Supported".
  std::string ErrorString(Return r) const;
  // OK, or Internal naming `what` and NVML's message.
  Status Check(Return r, const char* what) const;

  // Required entry points.
  Return (*DeviceGetCount)(unsigned int*) = nullptr;
  Return (*DeviceGetHandleByIndex)(unsigned int, Device*) = nullptr;
  Return (*DeviceGetName)(Device, char*, unsigned int) = nullptr;
  Return (*DeviceGetUUID)(Device, char*, unsigned int) = nullptr;
  Return (*DeviceGetMemoryInfo)(Device, Memory*) = nullptr;
  Return (*DeviceGetCudaComputeCapability)(Device, int*, int*) = nullptr;
  // Optional entry points (older drivers may lack them): nullptr when absent.
  Return (*DeviceGetPciInfo)(Device, PciInfo*) = nullptr;
  Return (*DeviceGetMinorNumber)(Device, unsigned int*) = nullptr;
  Return (*SystemGetDriverVersion)(char*, unsigned int) = nullptr;
  Return (*EventSetCreate)(EventSet*) = nullptr;
  Return (*DeviceGetSupportedEventTypes)(Device, unsigned long long*) = nullptr;
  Return (*DeviceRegisterEvents)(Device, unsigned long long, EventSet) = nullptr;
  Return (*EventSetWait)(EventSet, EventData*, unsigned int) = nullptr;
  Return (*EventSetFree)(EventSet) = nullptr;
  bool HasEvents() const {
    return EventSetCreate && DeviceGetSupportedEventTypes && DeviceRegisterEvents && EventSetWait &&
           EventSetFree;
  }

 private:
  Library() = default;
  void* handle_ = nullptr;
  Return (*init_)() = nullptr;
  Return (*shutdown_)() = nullptr;
  const char* (*error_string_)(Return) = nullptr;
};

}  // namespace easyscale::dp::nvml
