#include "absl/strings/str_cat.h"
#include "easyscale/common/log.h"
#include "easyscale/device_plugin/resource_manager.h"

namespace easyscale::dp {

DeviceTable::DeviceTable(std::vector<GpuDevice> devices) : devices_(std::move(devices)) {}

std::vector<GpuDevice> DeviceTable::Devices() const {
  std::lock_guard<std::mutex> lock(mu_);
  return devices_;
}

StatusOr<std::vector<GpuDevice>> DeviceTable::Lookup(const std::vector<std::string>& ids) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<GpuDevice> found;
  for (const auto& id : ids) {
    auto it = std::find_if(devices_.begin(), devices_.end(),
                           [&](const GpuDevice& d) { return d.id == id; });
    if (it == devices_.end())
      return absl::NotFoundError(absl::StrCat("unknown device ID \"", id, "\""));
    found.push_back(*it);
  }
  return found;
}

bool DeviceTable::SetHealth(const std::string& id, bool healthy, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(devices_.begin(), devices_.end(),
                           [&](const GpuDevice& d) { return d.id == id; });
    if (it == devices_.end() || it->healthy == healthy) return false;
    it->healthy = healthy;
    it->health_reason = healthy ? "" : reason;
    // Logged before the new version is visible: whoever sees the change can find why.
    if (healthy) {
      LogInfo("device-plugin", "device healthy again", {{"device", id}});
    } else {
      LogWarn("device-plugin", "device unhealthy", {{"device", id}, {"reason", reason}});
    }
    ++version_;
  }
  changed_.notify_all();
  return true;
}

bool DeviceTable::SetInferenceHolders(std::map<std::string, std::string> holders) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (holders == inference_holders_) return false;
    inference_holders_ = std::move(holders);
    ++version_;
  }
  changed_.notify_all();
  return true;
}

std::vector<GpuDevice> DeviceTable::Advertised() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<GpuDevice> out = devices_;
  for (GpuDevice& d : out) {
    auto it = inference_holders_.find(d.id);
    if (it == inference_holders_.end() || !d.healthy) continue;
    d.healthy = false;
    d.health_reason = "held by inference pod " + it->second;
  }
  return out;
}

uint64_t DeviceTable::Version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

uint64_t DeviceTable::WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, timeout, [&] { return version_ != seen; });
  return version_;
}

}  // namespace easyscale::dp
