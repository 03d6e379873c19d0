#include "device_plugin_service.h"

#include "absl/strings/str_cat.h"
#include "allocation.h"
#include "easyscale/common/log.h"

namespace easyscale::dp {
namespace {

grpc::Status ToGrpc(const Status& s) {
  const auto code = absl::IsNotFound(s) || absl::IsInvalidArgument(s)
                        ? grpc::StatusCode::INVALID_ARGUMENT
                        : grpc::StatusCode::INTERNAL;
  return grpc::Status(code, std::string(s.message()));
}

std::vector<std::string> Ids(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  return {ids.begin(), ids.end()};
}

}  // namespace

DevicePluginService::DevicePluginService(ResourceManager* rm,
                                         std::vector<std::string> control_device_paths)
    : rm_(rm), control_device_paths_(std::move(control_device_paths)) {}

v1beta1::DevicePluginOptions DevicePluginService::Options() {
  v1beta1::DevicePluginOptions o;
  o.set_pre_start_required(false);
  o.set_get_preferred_allocation_available(true);
  return o;
}

grpc::Status DevicePluginService::GetDevicePluginOptions(grpc::ServerContext*,
                                                         const v1beta1::Empty*,
                                                         v1beta1::DevicePluginOptions* out) {
  *out = Options();
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::ListAndWatch(
    grpc::ServerContext* ctx, const v1beta1::Empty*,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  uint64_t sent = 0;
  while (!ctx->IsCancelled() && !shutdown_) {
    const uint64_t version = rm_->Version();
    if (version != sent) {
      v1beta1::ListAndWatchResponse resp;
      for (const auto& d : rm_->Advertised()) {
        v1beta1::Device* dev = resp.add_devices();
        dev->set_id(d.id);
        dev->set_health(d.healthy ? kHealthy : kUnhealthy);
        if (d.numa_node >= 0) dev->mutable_topology()->add_nodes()->set_id(d.numa_node);
      }
      if (!writer->Write(resp)) break;  // kubelet went away
      LogDebug("device-plugin", "ListAndWatch sent", {{"devices", resp.devices_size()}});
      sent = version;
    }
    // Wake up at least every 200 ms to notice cancellation and shutdown.
    rm_->WaitForChange(sent, std::chrono::milliseconds(200));
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::GetPreferredAllocation(
    grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* req,
    v1beta1::PreferredAllocationResponse* out) {
  const std::vector<GpuDevice> inventory = rm_->Devices();
  for (const auto& c : req->container_requests()) {
    auto ids = PreferredAllocation(inventory, Ids(c.available_deviceids()),
                                   Ids(c.must_include_deviceids()), c.allocation_size());
    if (!ids.ok()) return ToGrpc(ids.status());
    auto* resp = out->add_container_responses();
    for (const auto& id : *ids) resp->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::Allocate(grpc::ServerContext*,
                                           const v1beta1::AllocateRequest* req,
                                           v1beta1::AllocateResponse* out) {
  for (const auto& c : req->container_requests()) {
    auto devices = rm_->Lookup(Ids(c.devices_ids()));
    if (!devices.ok()) {
      LogWarn("device-plugin", "Allocate refused",
              {{"error", std::string(devices.status().message())}});
      return ToGrpc(devices.status());
    }
    if (devices->empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no device IDs");
    const ContainerAllocation a = BuildAllocation(*devices, control_device_paths_);
    auto* resp = out->add_container_responses();
    for (const auto& [k, v] : a.envs) (*resp->mutable_envs())[k] = v;
    for (const auto& [k, v] : a.annotations) (*resp->mutable_annotations())[k] = v;
    for (const auto& node : a.devices) {
      auto* spec = resp->add_devices();
      spec->set_host_path(node.path);
      spec->set_container_path(node.path);
      spec->set_permissions(node.permissions);
    }
    LogInfo("device-plugin", "allocated", {{"devices", Ids(c.devices_ids())}});
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::PreStartContainer(grpc::ServerContext*,
                                                    const v1beta1::PreStartContainerRequest* req,
                                                    v1beta1::PreStartContainerResponse*) {
  // Not required (Options() says so); answering keeps a kubelet that calls it happy,
  // as long as the devices are ours.
  auto devices = rm_->Lookup(Ids(req->devices_ids()));
  return devices.ok() ? grpc::Status::OK : ToGrpc(devices.status());
}

}  // namespace easyscale::dp
