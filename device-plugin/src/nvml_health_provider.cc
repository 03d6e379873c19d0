// XID-based health through NVML event sets, with recovery: a device marked
// Unhealthy by a critical XID turns Healthy again after a quiet period.
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "easyscale/common/log.h"
#include "nvml_discovery.h"

namespace easyscale::dp {
namespace {

// XIDs caused by the application, not the GPU: they do not make it Unhealthy.
bool IsApplicationXid(unsigned long long xid) {
  switch (xid) {
    case 13:   // graphics engine exception: usually an out-of-range access in a kernel
    case 31:   // GPU memory page fault: an illegal address in user code
    case 43:   // GPU stopped processing: the user's context was reset
    case 45:   // preemptive cleanup after a process was killed
    case 68:   // video processor exception (NVDEC), from the application's stream
    case 109:  // context switch timeout caused by the application
      return true;
    default:
      return false;
  }
}

class NvmlHealthProvider : public HealthProvider {
 public:
  NvmlHealthProvider(std::shared_ptr<nvml::Library> lib, std::chrono::seconds recovery_quiet)
      : lib_(std::move(lib)), recovery_quiet_(recovery_quiet) {}
  ~NvmlHealthProvider() override { Stop(); }

  Status Start(ResourceManager* rm) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (thread_.joinable())
      return absl::FailedPreconditionError("NVML health provider started twice");
    if (!lib_->HasEvents()) return absl::FailedPreconditionError("NVML lacks the event functions");
    nvml::EventSet set = nullptr;
    if (Status s = lib_->Check(lib_->EventSetCreate(&set), "nvmlEventSetCreate"); !s.ok()) return s;
    std::map<nvml::Device, std::string> ids;
    for (const auto& d : rm->Devices()) {
      nvml::Device dev = nullptr;
      unsigned long long supported = 0;
      if (lib_->DeviceGetHandleByIndex(d.index, &dev) != nvml::kSuccess ||
          lib_->DeviceGetSupportedEventTypes(dev, &supported) != nvml::kSuccess ||
          (supported & nvml::kEventTypeXidCriticalError) == 0 ||
          lib_->DeviceRegisterEvents(dev, nvml::kEventTypeXidCriticalError, set) !=
              nvml::kSuccess) {
        LogWarn("device-plugin", "no XID events for this GPU; its health is not watched",
                {{"device", d.id}});
        continue;
      }
      ids[dev] = d.id;
    }
    stop_ = false;
    thread_ = std::thread([this, rm, set, ids] { Loop(rm, set, ids); });
    return absl::OkStatus();
  }

  void Stop() override {
    std::thread t;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      t = std::move(thread_);
    }
    if (t.joinable()) t.join();
  }

 private:
  using Clock = std::chrono::steady_clock;

  void Loop(ResourceManager* rm, nvml::EventSet set,
            const std::map<nvml::Device, std::string>& ids) {
    std::map<std::string, Clock::time_point> last_xid;  // Unhealthy devices by XID
    while (!stop_) {
      nvml::EventData data{};
      const nvml::Return r = lib_->EventSetWait(set, &data, 1000);
      if (r == nvml::kSuccess && data.event_type == nvml::kEventTypeXidCriticalError) {
        OnXid(rm, ids, data, &last_xid);
      } else if (r != nvml::kSuccess && r != nvml::kErrorTimeout) {
        LogWarn("device-plugin", "nvmlEventSetWait failed", {{"error", lib_->ErrorString(r)}});
        std::this_thread::sleep_for(std::chrono::seconds(1));  // do not spin on a broken set
      }
      Recover(rm, &last_xid);
    }
    lib_->EventSetFree(set);
  }

  void OnXid(ResourceManager* rm, const std::map<nvml::Device, std::string>& ids,
             const nvml::EventData& data, std::map<std::string, Clock::time_point>* last_xid) {
    const unsigned long long xid = data.event_data;
    if (IsApplicationXid(xid)) {
      LogInfo("device-plugin", "application XID ignored", {{"xid", xid}});
      return;
    }
    const std::string reason = absl::StrCat("critical XID ", xid);
    auto it = ids.find(data.device);
    if (it == ids.end()) {  // no device named: NVML could not attribute it, so all are suspect
      for (const auto& [dev, id] : ids) {
        rm->SetHealth(id, false, reason);
        (*last_xid)[id] = Clock::now();
      }
      return;
    }
    rm->SetHealth(it->second, false, reason);
    (*last_xid)[it->second] = Clock::now();
  }

  void Recover(ResourceManager* rm, std::map<std::string, Clock::time_point>* last_xid) {
    for (auto it = last_xid->begin(); it != last_xid->end();) {
      if (Clock::now() - it->second < recovery_quiet_) {
        ++it;
        continue;
      }
      auto devices = rm->Lookup({it->first});
      nvml::Device dev = nullptr;
      nvml::Memory mem{};
      const bool answers =
          devices.ok() &&
          lib_->DeviceGetHandleByIndex((*devices)[0].index, &dev) == nvml::kSuccess &&
          lib_->DeviceGetMemoryInfo(dev, &mem) == nvml::kSuccess;
      if (!answers) {
        it->second = Clock::now();  // still broken: wait another quiet period
        ++it;
        continue;
      }
      rm->SetHealth(it->first, true, "");
      it = last_xid->erase(it);
    }
  }

  std::shared_ptr<nvml::Library> lib_;
  const std::chrono::seconds recovery_quiet_;
  std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

std::unique_ptr<HealthProvider> MakeNvmlHealthProvider(std::shared_ptr<nvml::Library> lib,
                                                       std::chrono::seconds recovery_quiet) {
  return std::make_unique<NvmlHealthProvider>(std::move(lib), recovery_quiet);
}

}  // namespace easyscale::dp
