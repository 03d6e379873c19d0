#include "easyscale/device_plugin/pod_resources_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "podresources_v1.grpc.pb.h"

namespace easyscale::dp {

struct PodResourcesClient::Channel {
  std::unique_ptr<v1::PodResourcesLister::Stub> stub;
};

PodResourcesClient::PodResourcesClient(PodResourcesOptions options)
    : options_(std::move(options)), channel_(std::make_unique<Channel>()) {
  // gRPC reconnects by itself when kubelet recreates the socket; a short
  // backoff cap keeps the holders view at most a few seconds stale after a
  // kubelet restart (the default cap is two minutes).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  channel_->stub = v1::PodResourcesLister::NewStub(grpc::CreateCustomChannel(
      "unix:" + options_.socket, grpc::InsecureChannelCredentials(), args));
}

PodResourcesClient::~PodResourcesClient() = default;

StatusOr<DeviceHolders> PodResourcesClient::List() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options_.timeout);
  v1::ListPodResourcesRequest req;
  v1::ListPodResourcesResponse resp;
  const grpc::Status s = channel_->stub->List(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("pod-resources List on ", options_.socket, ": ", s.error_message()));
  }
  const auto& inference = options_.inference_resources;
  DeviceHolders holders;
  for (const auto& pod : resp.pod_resources()) {
    const std::string who = absl::StrCat(pod.namespace_(), "/", pod.name());
    for (const auto& container : pod.containers()) {
      for (const auto& devices : container.devices()) {
        std::map<std::string, std::string>* into = nullptr;
        if (devices.resource_name() == options_.training_resource) {
          into = &holders.training;
        } else if (std::find(inference.begin(), inference.end(), devices.resource_name()) !=
                   inference.end()) {
          into = &holders.inference;
        }
        if (into == nullptr) continue;
        for (const auto& id : devices.device_ids()) (*into)[id] = who;
      }
    }
  }
  return holders;
}

}  // namespace easyscale::dp
