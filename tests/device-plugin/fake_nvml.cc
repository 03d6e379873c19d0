// A stand-in libnvidia-ml.so for tests on machines without a driver: two
// "NVIDIA H200" GPUs, and XID events injected through a file. The plugin
// dlopens it exactly as it would the real library (--nvml-library PATH).
//
// FAKE_NVML_XID_FILE=path: when the file holds "<gpu index> <xid>", the next
// nvmlEventSetWait_v2 returns that XID event and the file is removed.
// FAKE_NVML_BROKEN=1: nvmlDeviceGetMemoryInfo fails (the GPU does not answer).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

extern "C" {

using nvmlReturn_t = int;
struct FakeDevice {
  int index;
};
using nvmlDevice_t = FakeDevice*;
using nvmlEventSet_t = void*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
};

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kUnknown = 999;
constexpr nvmlReturn_t kTimeout = 10;
constexpr unsigned int kCount = 2;
static FakeDevice g_devices[kCount] = {{0}, {1}};
static int g_event_set = 0;

nvmlReturn_t nvmlInit_v2() { return kSuccess; }
nvmlReturn_t nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(nvmlReturn_t r) { return r == kTimeout ? "Timeout" : "Fake error"; }
nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned int n) {
  std::snprintf(v, n, "999.99-fake");
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = kCount;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  if (i >= kCount) return kInvalidArgument;
  *d = &g_devices[i];
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t, char* name, unsigned int n) {
  std::snprintf(name, n, "NVIDIA H200");
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int n) {
  std::snprintf(uuid, n, "GPU-fake0000-0000-0000-0000-00000000000%d", d->index);
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t* m) {
  if (std::getenv("FAKE_NVML_BROKEN") != nullptr) return kUnknown;
  m->total = 143771ULL * 1024 * 1024;
  m->free = m->total;
  m->used = 0;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t, int* major, int* minor) {
  *major = 9;
  *minor = 0;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* p) {
  std::memset(p, 0, sizeof(*p));
  // A bus that does not exist in sysfs: NUMA node unknown.
  std::snprintf(p->busId, sizeof(p->busId), "00000000:F%d:00.0", d->index);
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int* minor) {
  *minor = static_cast<unsigned int>(d->index);
  return kSuccess;
}
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* s) {
  *s = &g_event_set;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t, unsigned long long* types) {
  *types = 0x8ULL;  // XID critical errors
  return kSuccess;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t, unsigned long long, nvmlEventSet_t) {
  return kSuccess;
}
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t, nvmlEventData_t* data, unsigned int timeout_ms) {
  const char* path = std::getenv("FAKE_NVML_XID_FILE");
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    unsigned int index = 0;
    unsigned long long xid = 0;
    if (path != nullptr) {
      std::ifstream in(path);
      if (in >> index >> xid && index < kCount) {
        in.close();
        unlink(path);
        std::memset(data, 0, sizeof(*data));
        data->device = &g_devices[index];
        data->eventType = 0x8ULL;
        data->eventData = xid;
        return kSuccess;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return kTimeout;
}
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t) { return kSuccess; }

}  // extern "C"
