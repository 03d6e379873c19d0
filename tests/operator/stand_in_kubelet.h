// File: tests/operator/stand_in_kubelet.h
//
// The kubelet's part for multi-process tests, for every node at once: admits
// Pending pods bound to a node when the node's GPUs (easyscale.io/gpu-count)
// have room (a worker pod takes one, an inference pod its nvidia.com/gpu),
// marks them Running with podIP 127.0.0.1, starts worker pods' containers
// through a PodRuntime with the pod's env resolved (downward API fields
// included), stops them when the pod is terminating and then confirms the
// deletion (grace 0), and writes Succeeded/Failed when they exit. A GPU stays
// used until its pod object is gone.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "easyscale/operator/informer.h"
#include "easyscale/operator/kube_client.h"

namespace easyscale::op::testing {

class PodRuntime {
 public:
  virtual ~PodRuntime() = default;
  virtual Status Start(const nlohmann::json& pod,
                       const std::map<std::string, std::string>& env) = 0;
  // Like SIGTERM then SIGKILL after a grace period.
  virtual void Stop(const std::string& pod) = 0;
  // The exit code once the pod's process has ended.
  virtual std::optional<int> Exited(const std::string& pod) = 0;
};

// Environment of the pod's first container, downward API fields resolved.
std::map<std::string, std::string> ResolvePodEnv(const nlohmann::json& pod);

class StandInKubelet {
 public:
  StandInKubelet(KubeClient* client, PodRuntime* runtime);
  ~StandInKubelet();
  void Start();
  void Stop();

 private:
  void Loop();
  void Sync();

  KubeClient* client_;
  PodRuntime* runtime_;
  Informer pods_;
  Informer nodes_;
  std::set<std::string> started_;  // ns/name of pods whose containers run
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

}  // namespace easyscale::op::testing
