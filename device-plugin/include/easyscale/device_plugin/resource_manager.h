// File: easyscale/device_plugin/resource_manager.h
//
// The device questions the gRPC layer asks, answered from one node inventory.
// The kubelet layer (plugin_server.h) never looks at NVML or files: it asks a
// ResourceManager, and HealthProviders report into it.
//
//   DeviceTable rm(devices);
//   rm.SetHealth("GPU-1", false, "XID 79");   // wakes ListAndWatch streams
//   uint64_t v = rm.Version();
//   rm.WaitForChange(v, std::chrono::seconds(1));
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/device_plugin/gpu_device.h"

namespace easyscale::dp {

class ResourceManager {
 public:
  virtual ~ResourceManager() = default;

  // A snapshot of every device with its current health, in inventory order.
  virtual std::vector<GpuDevice> Devices() const = 0;
  // The devices behind `ids`, in the order asked; NotFound names the first
  // unknown ID. Unhealthy devices are returned too: kubelet decides.
  virtual StatusOr<std::vector<GpuDevice>> Lookup(const std::vector<std::string>& ids) const = 0;
  // Records a health change; returns true when it changed anything. Unhealthy
  // devices can come back: `healthy` true clears the reason.
  virtual bool SetHealth(const std::string& id, bool healthy, const std::string& reason) = 0;
  // The devices inference pods hold now (device id -> "ns/pod"). kubelet knows
  // nothing of another plugin's nvidia.com/gpu on the same GPU: unless told,
  // it would count such a GPU free and give it to a worker. Returns true when
  // it changed anything.
  virtual bool SetInferenceHolders(std::map<std::string, std::string> holders) = 0;
  // What ListAndWatch tells kubelet: Devices(), with a GPU inference holds
  // Unhealthy, so kubelet neither admits nor allocates a worker on it.
  virtual std::vector<GpuDevice> Advertised() const = 0;
  // Bumped on every change; WaitForChange returns the new version, or `seen`
  // when `timeout` passed first.
  virtual uint64_t Version() const = 0;
  virtual uint64_t WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) const = 0;
};

// The in-memory ResourceManager every backend fills.
class DeviceTable : public ResourceManager {
 public:
  explicit DeviceTable(std::vector<GpuDevice> devices);

  std::vector<GpuDevice> Devices() const override;
  StatusOr<std::vector<GpuDevice>> Lookup(const std::vector<std::string>& ids) const override;
  bool SetHealth(const std::string& id, bool healthy, const std::string& reason) override;
  bool SetInferenceHolders(std::map<std::string, std::string> holders) override;
  std::vector<GpuDevice> Advertised() const override;
  uint64_t Version() const override;
  uint64_t WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) const override;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::vector<GpuDevice> devices_;
  std::map<std::string, std::string> inference_holders_;
  uint64_t version_ = 1;
};

}  // namespace easyscale::dp
