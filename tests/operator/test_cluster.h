// File: tests/operator/test_cluster.h
//
// A whole simulated cluster for multi-process tests and benches: the test API
// server over HTTPS (self-signed CA, token, a kubeconfig file), easyscale-operator
// processes (optionally two, with leader election), and the stand-in kubelet
// running worker pods through a PodRuntime. Everything lives under one temp
// folder that is removed at the end.
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
#include "easyscale/operator/test_apiserver.h"
#include "stand_in_kubelet.h"

namespace easyscale::op::testing {

struct OperatorProcess {
  std::string identity;
  int healthPort = 0;
  int metricsPort = 0;
  int controlPort = 0;
  std::optional<Subprocess> process;
  std::string controlUrl() const { return "http://127.0.0.1:" + std::to_string(controlPort); }
  int Get(int port, const std::string& path, std::string* body = nullptr) const;
  bool Ready() const { return Get(healthPort, "/readyz") == 200; }
};

struct NodeSpec {
  std::string name;
  std::string gpuType;
  int gpus = 0;
};

class TestCluster {
 public:
  explicit TestCluster(const std::string& name);
  ~TestCluster();

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
  // A stand-in for the operator's Service: forwards worker control traffic to
  // whichever operator is ready (the leader). Returns its URL.
  std::string StartControlService();

  KubeClient& client() { return *client_; }
  TestApiServer& server() { return *server_; }
  const std::string& dir() const { return dir_; }
  const std::string& kubeconfig() const { return kubeconfig_; }

  nlohmann::json Job(const std::string& name);
  nlohmann::json JobStatus(const std::string& name);
  std::vector<nlohmann::json> WorkerPods(const std::string& job);
  int EventCount(const std::string& object, const std::string& reason);
  std::string LeaseHolder(const std::string& lease = "easyscale-operator");

 private:
  std::string dir_;
  std::string kubeconfig_;
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<KubeClient> client_;
  std::vector<std::unique_ptr<OperatorProcess>> operators_;
  std::unique_ptr<PodRuntime> runtime_;
  std::unique_ptr<StandInKubelet> kubelet_;
  std::unique_ptr<httplib::Server> service_;
  std::thread serviceThread_;
};

// Where the build put easyscale-operator and (when built) easyscale-worker.
std::string OperatorBinary();
std::string WorkerBinary();

}  // namespace easyscale::op::testing
