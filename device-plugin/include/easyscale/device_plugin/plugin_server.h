// File: easyscale/device_plugin/plugin_server.h
//
// The kubelet layer: serves the DevicePlugin gRPC service on its own Unix socket
// in the device-plugin folder, dials that socket to prove it answers, then
// registers with kubelet's Registration service. Every device question goes to
// the ResourceManager.
//
// Run() watches kubelet.sock: when kubelet restarts it recreates the socket,
// and the plugin restarts its server and registers again (as the NVIDIA plugin
// does). More than `max_restarts_per_hour` restarts is an error: the DaemonSet
// then restarts the pod.
//
//   PluginServer server(&rm, opts);
//   ES_RETURN_IF_ERROR(server.Start());
//   std::thread t([&] { server.Run(); });   // returns after Stop()
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/device_plugin/resource_manager.h"

namespace grpc {
class Server;
}

namespace easyscale::dp {

struct PluginServerOptions {
  // kubelet's Registration socket; the plugin socket goes in the same folder.
  std::string kubelet_socket = "/var/lib/kubelet/device-plugins/kubelet.sock";
  std::string endpoint = "easyscale-gpu.sock";  // file name of the plugin socket
  std::string resource_name = "easyscale.io/gpu";
  // Driver control nodes given to every container (only those present on the host).
  std::vector<std::string> control_device_paths;
  std::chrono::milliseconds watch_interval{500};
  std::chrono::milliseconds rpc_timeout{5000};
  int max_restarts_per_hour = 5;
};

class DevicePluginService;

class PluginServer {
 public:
  PluginServer(ResourceManager* rm, PluginServerOptions options);
  ~PluginServer();
  PluginServer(const PluginServer&) = delete;
  PluginServer& operator=(const PluginServer&) = delete;

  // Serves, dials itself and registers if kubelet.sock exists (otherwise Run()
  // registers once it appears). FailedPrecondition when the folder is missing.
  Status Start();
  // Watches for kubelet restarts until Stop(); an error when restarts are capped.
  Status Run();
  // Safe from any thread and more than once.
  void Stop();

  int registrations() const { return registrations_.load(); }
  std::string plugin_socket() const;

 private:
  Status Serve();
  void StopServing();
  Status DialSelf();
  Status Register();
  Status Restart(const char* why);

  ResourceManager* rm_;
  PluginServerOptions options_;
  std::string dir_;
  std::unique_ptr<DevicePluginService> service_;
  std::mutex server_mu_;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<bool> stop_{false};
  std::atomic<int> registrations_{0};
  bool registered_ = false;
  // The kubelet.sock we registered with (inode and change time).
  ino_t registered_inode_ = 0;
  int64_t registered_ctime_ns_ = 0;
  std::vector<std::chrono::steady_clock::time_point> restarts_;
};

}  // namespace easyscale::dp
