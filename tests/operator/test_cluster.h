// File: tests/operator/test_cluster.h
//
// A whole simulated cluster for multi-process tests and benches: the test API
// server over HTTPS (self-signed CA, token, a kubeconfig file), easyscale-operator
// processes (optionally two, with leader election), and the stand-in kubelet
// running pods through a PodRuntime, on the host or isolated on a pod network
// of their own. Everything lives under one temp folder that is removed at the
// end, with the pod network.
//
//   TestCluster c("scale", {.isolatePods = true});
//   ASSERT_TRUE(c.StartApiServer().ok());
//   ASSERT_TRUE(c.AddNodes({{"n1", "a100", 2}, {"n2", "h100", 2}, {"n3", "v100", 2}}).ok());
//   OperatorProcess* op = c.StartWithRealWorkers("op", WorkerBinary());
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "easyscale/common/subprocess.h"

namespace httplib {
class Server;
}
#include "easyscale/operator/kube_client.h"
#include "stand_in_kubelet.h"
#include "test_apiserver.h"

namespace easyscale::op::testing {

struct OperatorProcess {
  std::string identity;
  int healthPort = 0;
  int metricsPort = 0;
  std::string controlHost;  // where pods reach the control endpoint
  int controlPort = 0;
  std::optional<Subprocess> process;
  std::string log;  // its stdout and stderr, every start's
  // The log's last lines, for a failed expectation's message.
  std::string LogTail() const;
  std::string controlUrl() const {
    return "http://" + controlHost + ":" + std::to_string(controlPort);
  }
  int Get(int port, const std::string& path, std::string* body = nullptr) const;
  bool Ready() const { return Get(healthPort, "/readyz") == 200; }
};

struct NodeSpec {
  std::string name;
  std::string gpuType;
  int gpus = 0;
};

struct TestClusterOptions {
  // Pods like pods on separate nodes: each in its own network namespace with
  // its own IP on the cluster's pod network and in its own mount namespace
  // with its own emptyDirs (pod_network.h, pod_sandbox.h). The operators'
  // control endpoint then listens on the network's host address, which is
  // all pods can reach of the host. Needs root. Off: pods are processes on
  // the host, at 127.0.0.1, sharing its files.
  bool isolatePods = false;
  // GPUs as devices two device plugins share (stand_in_kubelet.h): inference
  // may be given a worker's GPU, and the kubelet publishes who holds which.
  bool devicePlugins = false;
};

class TestCluster {
 public:
  explicit TestCluster(const std::string& name, TestClusterOptions options = {});
  ~TestCluster();

  // The API server, and the pod network when pods are isolated.
  Status StartApiServer();
  // Nodes as the device plugin labels them.
  Status AddNodes(const std::vector<NodeSpec>& nodes);
  // The standard two-node cluster: n1 with two a100s, both held by the
  // inference pod `inference` (Running once the kubelet admits it), and n2
  // with two idle h100s.
  Status AddTwoNodesWithInference(const std::string& inference);
  // `controlUrl` empty: the operator's own control port. A binary that cannot
  // start fails the test (InternalError).
  OperatorProcess* StartOperator(const std::string& identity, std::vector<std::string> extraArgs,
                                 const std::string& controlUrl = "");
  void StartKubelet(std::unique_ptr<PodRuntime> runtime);
  // Real `easyscale-worker k8s` pods (`worker`, through WorkerRuntime) and an
  // operator that makes them CPU workers.
  OperatorProcess* StartWithRealWorkers(const std::string& identity, const std::string& worker);
  // A stand-in for the operator's Service: forwards worker control traffic to
  // whichever operator is ready (the leader). Returns its URL.
  std::string StartControlService();

  // The host folder that stands for claim `claimName` in namespace `ns` when
  // pods are isolated (a test puts the user's files there); "" otherwise.
  std::string ClaimDir(const std::string& ns, const std::string& claimName) const;
  // The network namespace (path) of isolated pod "namespace/name"; "" if none.
  std::string PodNetns(const std::string& key) const;
  // Sends `signal` to the process of pod "namespace/name" (SIGKILL: a crash).
  void SignalPod(const std::string& key, int signal) { runtime_->Signal(key, signal); }
  KubeClient& client() { return *client_; }
  TestApiServer& server() { return *server_; }
  const std::string& dir() const { return dir_; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  // The address pods reach the host at: the pod network's, or 127.0.0.1.
  std::string hostAddress() const;

  nlohmann::json Job(const std::string& name);
  nlohmann::json JobStatus(const std::string& name);
  std::vector<nlohmann::json> WorkerPods(const std::string& job);
  int EventCount(const std::string& object, const std::string& reason);
  std::string LeaseHolder(const std::string& lease = "easyscale-operator");

 private:
  // Starts o's process on ports FreePort picks (o.identity, o.controlHost and
  // o.log set).
  void StartOperatorOnFreePorts(OperatorProcess& o, const std::vector<std::string>& extraArgs,
                                const std::string& controlUrl);
  // Whether o's process ended before its health port answered because a port
  // was taken (its log says so).
  static bool ExitedOnABusyPort(OperatorProcess& o);

  TestClusterOptions options_;
  std::string dir_;
  std::string kubeconfig_;
  std::unique_ptr<PodNetwork> network_;
  std::unique_ptr<PodVolumes> volumes_;
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<KubeClient> client_;
  std::vector<std::unique_ptr<OperatorProcess>> operators_;
  std::unique_ptr<PodRuntime> runtime_;
  std::unique_ptr<StandInKubelet> kubelet_;
  std::unique_ptr<httplib::Server> service_;
  std::thread serviceThread_;
};

// easyscale-operator flags for leader election in the "default" namespace with
// short periods (a 2 s lease), so a standby takes over within seconds.
std::vector<std::string> FastLeaderElectionArgs();

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

// What `easyscale-worker local` (`worker`) with `args` printed on stdout, with
// its checkpoints in a fresh <dir>/ref-ckpt; "" when it fails.
std::string LocalRunOutput(const std::string& worker, const std::string& dir,
                           const std::vector<std::string>& args);

// The digest of the reference run: `steps` of the same training on a fixed
// layout of 8 workers (one EST each) with `easyscale-worker local` (`worker`),
// with `model`'s flags (the built-in MLP unless told); "" when it fails.
// Files go under `dir`.
std::string FixedRunDigest(const std::string& worker, const std::string& dir, int64_t steps,
                           const std::vector<std::string>& model = {"--model", "mlp"});

// Where the build put easyscale-operator and (when built) easyscale-worker.
std::string OperatorBinary();
std::string WorkerBinary();

}  // namespace easyscale::op::testing
