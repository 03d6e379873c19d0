// File: tests/operator/stand_in_kubelet.h
//
// The kubelet's part for multi-process tests, for every node at once. It
// admits Pending pods bound to a node when the node's GPUs
// (easyscale.io/gpu-count) have room (a worker pod takes one, an inference pod
// its nvidia.com/gpu); a worker pod without room is rejected as kubelet's
// admission does (Failed, reason OutOfeasyscale.io/gpu), an inference pod
// waits (its platform's scheduler binds it once the GPU is free). It resolves
// the container's env (downward API fields, secretKeyRef through the API
// server; a missing secret keeps the pod Pending with
// CreateContainerConfigError), marks it Running with its IP and starts
// the container's command through a PodRuntime. When the process ends it
// writes Succeeded/Failed and containerStatuses[0].state.terminated (exitCode,
// reason Completed or Error). A pod being deleted gets SIGTERM, SIGKILL after
// its grace period, and its deletion is confirmed once the process is gone. A
// GPU stays used until its pod object is gone. Pods without a command (the
// tests' inference pods) only hold their GPUs. The pods still running when the
// kubelet stops get SIGTERM, and SIGKILL after 10 s. With PodIsolation each pod
// has its own network and mount namespaces (status.podIP is its address), and
// what kubelet gives a pod to reach the API server (in-cluster config): the
// KUBERNETES_SERVICE_HOST/PORT env and, unless automountServiceAccountToken is
// false, its service account's token, ca.crt and namespace at
// /var/run/secrets/kubernetes.io/serviceaccount; its /etc/hosts names the pod
// and, standing in for cluster DNS and kube-proxy, each Service of the cluster
// (<name>.<namespace>.svc[.cluster.local]) at the address of a Running pod it
// selects when the pod starts (so a Service's port must equal its targetPort).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "easyscale/operator/informer.h"
#include "easyscale/operator/kube_client.h"
#include "pod_network.h"
#include "pod_sandbox.h"

namespace easyscale::op::testing {

// Runs the containers of pods; pods are named by their "namespace/name" key.
class PodRuntime {
 public:
  virtual ~PodRuntime() = default;
  // Whether the pod's container runs here; a pod that does not only holds
  // its GPUs. By default: the container has a command.
  virtual bool Runs(const nlohmann::json& pod) const;
  // Starts the pod's container with `env`, inside `sandbox` when there is one.
  // Called from the kubelet's thread only.
  virtual Status Start(const nlohmann::json& pod, const std::map<std::string, std::string>& env,
                       const PodSandbox* sandbox) = 0;
  // SIGTERM asks the pod's process to stop; SIGKILL ends it.
  virtual void Signal(const std::string& pod, int signal) = 0;
  // The exit code (128 + the signal when killed) once the process has ended.
  virtual std::optional<int> Exited(const std::string& pod) = 0;
  // Forgets an ended pod.
  virtual void Remove(const std::string& pod) = 0;
};

// Environment of the pod's first container: values, downward API fields, and
// secretKeyRef read from the API server.
StatusOr<std::map<std::string, std::string>> ResolvePodEnv(const nlohmann::json& pod,
                                                           KubeClient& client);

// Pods isolated like pods on nodes of their own: each gets a network namespace
// and address on `network`, and its volumes from `volumes` in a mount
// namespace of its own. Without it pods run on the host, at 127.0.0.1.
struct PodIsolation {
  PodNetwork* network = nullptr;
  const PodVolumes* volumes = nullptr;
  // The API server as pods reach it; the token stands for every service account's.
  struct ApiServer {
    std::string host;
    int port = 0;
    std::string token;
    std::string caPem;
  };
  std::optional<ApiServer> apiServer;
};

// With `devicePlugins`, each GPU is a device, as two device plugins share a
// node's GPUs on a real one: a worker is given the lowest device that no pod
// holds (our plugin advertises those inference holds Unhealthy), and it is
// rejected when there is none; an inference pod is given the lowest devices
// no inference pod holds, workers or not (the NVIDIA plugin knows nothing of
// ours), and is admitted at once when there are enough. The kubelet then
// publishes each node's devices and their holders (heldBy, trainingPod) as
// the device plugin does. Without it, one GPU count a node.
struct StandInKubeletOptions {
  bool devicePlugins = false;
};

class StandInKubelet {
 public:
  StandInKubelet(KubeClient* client, PodRuntime* runtime,
                 std::optional<PodIsolation> isolation = std::nullopt,
                 StandInKubeletOptions options = {});
  ~StandInKubelet();
  void Start();
  // Stops the pods still running, then the kubelet.
  void Stop();

 private:
  using Clock = std::chrono::steady_clock;
  // A pod admitted to run here.
  struct Admitted {
    bool process = false;                     // its container's process is known to the runtime
    std::optional<Clock::time_point> killAt;  // SIGTERM sent; SIGKILL at this time
    bool killed = false;
  };

  void Loop();
  void Sync();
  // Bound to one of the nodes `names`, Pending, not ended, not admitted yet.
  bool Admissible(const nlohmann::json& pod, const std::set<std::string>& names) const;
  // Admit the Pending pods bound to a node with room, by one GPU count a node
  // or, with devicePlugins, by device; reject a worker without room.
  void AdmitByCount(const std::vector<nlohmann::json>& pods,
                    const std::vector<nlohmann::json>& nodes, const std::set<std::string>& names);
  void AdmitByDevice(const std::vector<nlohmann::json>& pods,
                     const std::vector<nlohmann::json>& nodes, const std::set<std::string>& names);
  // Follows admitted pods: ended processes, deletions, pods that are gone.
  void Follow();
  // Starts a pod; false when it has to wait (its env cannot be resolved yet).
  bool Admit(const nlohmann::json& pod);
  // Ends the process of a pod being deleted; true once it is gone.
  bool Terminate(const std::string& key, Admitted& a, int graceSeconds);
  // Writes the end of the pod's container: phase and state.terminated.
  // As kubelet's admission rejects a bound pod: phase Failed, reason
  // OutOf<resource>, no container ever started.
  void Reject(const nlohmann::json& pod, const std::string& resource, int requested, int used,
              int capacity);
  void ReportTerminated(const nlohmann::json& pod, int exitCode, const std::string& reason,
                        const std::string& message = "");
  // The pod's address: its own with isolation (made on the first call), else 127.0.0.1.
  StatusOr<std::string> PodIp(const std::string& key);
  // Starts the pod's container, in its sandbox with isolation.
  Status StartContainer(const nlohmann::json& pod, std::map<std::string, std::string> env);
  // What kubelet mounts besides volumes: the service account's files and /etc/hosts.
  StatusOr<std::vector<BindMount>> KubeletFiles(const nlohmann::json& pod);
  // /etc/hosts of a pod: itself, and each Service at a Running pod it selects.
  std::string HostsFile(const nlohmann::json& pod);
  // Frees what isolation gave an ended pod: its address; once deleted, its emptyDirs too.
  void Release(const std::string& key, bool deleted);
  void StopAll();

  KubeClient* client_;
  PodRuntime* runtime_;
  std::optional<PodIsolation> isolation_;
  StandInKubeletOptions options_;
  std::map<std::string, std::vector<int>> devicesOf_;  // pod key -> its devices (devicePlugins)
  std::map<std::string, std::string> published_;       // node -> its last devices annotation
  Informer pods_;
  Informer nodes_;
  std::map<std::string, Admitted> admitted_;
  std::map<std::string, Clock::time_point> retryAt_;  // pods waiting for their env
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

}  // namespace easyscale::op::testing
