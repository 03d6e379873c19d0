// File: easyscale/device_plugin/node_publisher.h
//
// Writes the node inventory patch (node_inventory.h) where the operator reads
// it: the Node object through the API server (JSON merge patch), or a file for
// tests. The reporter polls pod-resources and publishes only on change.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "easyscale/common/status.h"
#include "easyscale/device_plugin/node_inventory.h"
#include "easyscale/device_plugin/pod_resources_client.h"
#include "easyscale/device_plugin/resource_manager.h"

namespace easyscale::dp {

class NodePublisher {
 public:
  virtual ~NodePublisher() = default;
  virtual Status Publish(const nlohmann::json& patch) = 0;
  virtual std::string Describe() const = 0;
};

// Writes the patch atomically to `path`.
std::unique_ptr<NodePublisher> MakeFilePublisher(std::string path);

struct ApiServerConfig {
  std::string url;  // "https://10.0.0.1:443" or "http://127.0.0.1:8080" (tests)
  std::string node_name;
  // The bearer token's file, read at every PATCH: kubelet rewrites a service
  // account's token before it expires. Empty: no token.
  std::string token_path;
  std::string ca_path;  // CA bundle for https; empty: system default
};

// In-cluster config: KUBERNETES_SERVICE_HOST/PORT and the token and ca.crt in
// `service_account_dir`. `url_override` (--apiserver) replaces all of it.
StatusOr<ApiServerConfig> LoadApiServerConfig(const std::string& node_name,
                                              const std::string& url_override,
                                              const std::string& service_account_dir);
// PATCH /api/v1/nodes/NAME with application/merge-patch+json.
std::unique_ptr<NodePublisher> MakeApiServerPublisher(ApiServerConfig config);

// Every `interval`: asks pod-resources who holds what, tells `rm` which GPUs
// inference holds (kubelet then sees them Unhealthy), joins the holders with
// the inventory and publishes when the patch differs from the last one written
// (`publisher` may be null: nothing is published).
class InventoryReporter {
 public:
  InventoryReporter(ResourceManager* rm, std::unique_ptr<PodResourcesClient> pods,
                    std::unique_ptr<NodePublisher> publisher, std::chrono::milliseconds interval);
  ~InventoryReporter();
  void Start();
  void Stop();  // safe twice
  // One poll-and-publish round (Start() runs these on a thread).
  Status ReportOnce();

 private:
  ResourceManager* rm_;
  std::unique_ptr<PodResourcesClient> pods_;
  std::unique_ptr<NodePublisher> publisher_;
  std::chrono::milliseconds interval_;
  DeviceHolders holders_;
  bool have_holders_ = false;  // nothing is published before pod-resources answers once
  std::optional<nlohmann::json> last_published_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace easyscale::dp
