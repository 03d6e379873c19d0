// Test double of kubelet: its Registration service on <dir>/kubelet.sock and
// its pod-resources service on <dir>/pod-resources.sock, both real gRPC
// servers on Unix sockets, plus a client of the plugin's own socket.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "deviceplugin_v1beta1.grpc.pb.h"
#include "podresources_v1.grpc.pb.h"

namespace easyscale::dp::testing {

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string dir);
  ~FakeKubelet();

  std::string registration_socket() const { return dir_ + "/kubelet.sock"; }
  std::string pod_resources_socket() const { return dir_ + "/pod-resources.sock"; }

  // Starts (or restarts, recreating kubelet.sock) the Registration server.
  void StartRegistration();
  void StopRegistration();  // and deletes kubelet.sock, as a stopping kubelet does

  // Waits until at least `n` Register calls arrived; returns them all.
  std::vector<v1beta1::RegisterRequest> WaitForRegistrations(size_t n,
                                                             std::chrono::milliseconds timeout);

  // Starts (the constructor does) or stops, deleting its socket, the
  // pod-resources server.
  void StartPodResources();
  void StopPodResources();

  // What List answers from now on: (namespace, pod, resource, device IDs).
  struct Holding {
    std::string ns, pod, resource;
    std::vector<std::string> device_ids;
  };
  void SetPodResources(const std::vector<Holding>& holdings);

  // A stub on the plugin socket `<dir>/<endpoint>`.
  std::unique_ptr<v1beta1::DevicePlugin::Stub> DialPlugin(const std::string& endpoint) const;

 private:
  class Registration;
  class PodResources;

  std::string dir_;
  std::unique_ptr<Registration> registration_;
  std::unique_ptr<PodResources> pod_resources_;
  std::unique_ptr<grpc::Server> registration_server_;
  std::unique_ptr<grpc::Server> pod_resources_server_;
};

}  // namespace easyscale::dp::testing
