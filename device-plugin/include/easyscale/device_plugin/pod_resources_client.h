// File: easyscale/device_plugin/pod_resources_client.h
//
// A client of kubelet's pod-resources API v1 (List) on its Unix socket: which
// pod holds which device. Devices of the inference resources (nvidia.com/gpu by
// default) go to DeviceHolders::inference, those of easyscale.io/gpu to
// DeviceHolders::training; other resources are ignored.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/device_plugin/node_inventory.h"

namespace easyscale::dp {

struct PodResourcesOptions {
  std::string socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::vector<std::string> inference_resources = {"nvidia.com/gpu"};
  std::string training_resource = "easyscale.io/gpu";
  std::chrono::milliseconds timeout{5000};
};

class PodResourcesClient {
 public:
  explicit PodResourcesClient(PodResourcesOptions options);
  ~PodResourcesClient();
  // Unavailable when kubelet does not answer (retry later).
  StatusOr<DeviceHolders> List();

 private:
  struct Channel;
  PodResourcesOptions options_;
  std::unique_ptr<Channel> channel_;
};

}  // namespace easyscale::dp
