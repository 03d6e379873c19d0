// Internal: the DevicePlugin gRPC service kubelet calls. Every answer comes from
// the ResourceManager; allocation decisions live in allocation.h.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "deviceplugin_v1beta1.grpc.pb.h"
#include "easyscale/device_plugin/resource_manager.h"

namespace easyscale::dp {

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(ResourceManager* rm, std::vector<std::string> control_device_paths);

  // Ends every ListAndWatch stream (the server is going away).
  void Shutdown() { shutdown_ = true; }
  void Reopen() { shutdown_ = false; }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override;
  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override;
  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override;
  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest* req,
                                 v1beta1::PreStartContainerResponse*) override;

  static v1beta1::DevicePluginOptions Options();

 private:
  ResourceManager* rm_;
  const std::vector<std::string> control_device_paths_;
  std::atomic<bool> shutdown_{false};
};

}  // namespace easyscale::dp
