#include "nvml_api.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "easyscale/common/log.h"

namespace easyscale::dp::nvml {
namespace {

// Looks `symbol` up; appends its name to `missing` when the library lacks it.
template <typename Fn>
void Bind(void* handle, const char* symbol, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (*out != nullptr) return;
  if (!missing->empty()) *missing += ", ";
  *missing += symbol;
}

}  // namespace

StatusOr<std::unique_ptr<Library>> Library::Load(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::UnavailableError(absl::StrCat("NVML not found: dlopen(\"", path,
                                               "\") failed: ", err ? err : "unknown error",
                                               " (no NVIDIA driver on this node?)"));
  }
  std::unique_ptr<Library> lib(new Library());
  lib->handle_ = handle;
  std::string missing;   // required: discovery cannot work without them
  std::string optional;  // NUMA node, device node, driver version, XID events
  Bind(handle, "nvmlInit_v2", &lib->init_, &missing);
  Bind(handle, "nvmlShutdown", &lib->shutdown_, &missing);
  Bind(handle, "nvmlErrorString", &lib->error_string_, &missing);
  Bind(handle, "nvmlDeviceGetCount_v2", &lib->DeviceGetCount, &missing);
  Bind(handle, "nvmlDeviceGetHandleByIndex_v2", &lib->DeviceGetHandleByIndex, &missing);
  Bind(handle, "nvmlDeviceGetName", &lib->DeviceGetName, &missing);
  Bind(handle, "nvmlDeviceGetUUID", &lib->DeviceGetUUID, &missing);
  Bind(handle, "nvmlDeviceGetMemoryInfo", &lib->DeviceGetMemoryInfo, &missing);
  Bind(handle, "nvmlDeviceGetCudaComputeCapability", &lib->DeviceGetCudaComputeCapability,
       &missing);
  Bind(handle, "nvmlDeviceGetPciInfo_v3", &lib->DeviceGetPciInfo, &optional);
  Bind(handle, "nvmlDeviceGetMinorNumber", &lib->DeviceGetMinorNumber, &optional);
  Bind(handle, "nvmlSystemGetDriverVersion", &lib->SystemGetDriverVersion, &optional);
  Bind(handle, "nvmlEventSetCreate", &lib->EventSetCreate, &optional);
  Bind(handle, "nvmlDeviceGetSupportedEventTypes", &lib->DeviceGetSupportedEventTypes, &optional);
  Bind(handle, "nvmlDeviceRegisterEvents", &lib->DeviceRegisterEvents, &optional);
  Bind(handle, "nvmlEventSetWait_v2", &lib->EventSetWait, &optional);
  Bind(handle, "nvmlEventSetFree", &lib->EventSetFree, &optional);
  if (!missing.empty()) {
    // The destructor must not call nvmlShutdown on a library we never initialised.
    lib->shutdown_ = nullptr;
    return absl::FailedPreconditionError(
        absl::StrCat("NVML at \"", path, "\" lacks symbols: ", missing, " (driver too old?)"));
  }
  if (!optional.empty()) {
    LogWarn("device-plugin", "NVML lacks optional symbols; those details stay unknown",
            {{"symbols", optional}});
  }
  const Return r = lib->init_();
  if (r != kSuccess) {
    const std::string text = lib->ErrorString(r);
    lib->shutdown_ = nullptr;
    return absl::FailedPreconditionError(absl::StrCat("nvmlInit failed: ", text));
  }
  return lib;
}

Library::~Library() {
  if (shutdown_ != nullptr) shutdown_();
  if (handle_ != nullptr) dlclose(handle_);
}

std::string Library::ErrorString(Return r) const {
  const char* text = error_string_ != nullptr ? error_string_(r) : nullptr;
  return text != nullptr ? std::string(text) : absl::StrCat("NVML error ", r);
}

Status Library::Check(Return r, const char* what) const {
  if (r == kSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", ErrorString(r)));
}

}  // namespace easyscale::dp::nvml
