// File: tests/operator/pod_network.h
//
// The network of one test cluster, for pods that share nothing but the
// network, like pods on separate nodes: a Linux bridge and, per pod, a network
// namespace with its own address on the bridge (a veth pair; loopback up; the
// default route via the host's address), and the host's own address on the
// bridge in the root namespace, where the operator's control endpoint listens.
//
//   StatusOr<std::unique_ptr<PodNetwork>> net = PodNetwork::Create();
//   StatusOr<PodNetwork::Pod> pod = (*net)->AddPod("default/w-0");  // {ip, netns}
//
// The bridge sits in a network namespace of its own, joined to the root one by
// one veth pair that carries the host's address: bridged pod-to-pod traffic
// then never meets the host's firewall (with bridge-nf-call-iptables on, a
// DROP FORWARD policy as Docker leaves it would drop it), and bridge-nf-call is
// switched off in that namespace as well. Names carry the pid (namespaces
// easyscale-<pid>-<n>-..., the root link es<pid>h<n>) and the /24 in 10/8 is
// picked per process and cluster, away from the host's routes, so test
// processes running side by side do not collide; what dead test processes
// left behind is removed first, their processes included. Every `ip` command
// has a time limit, and a cluster holds at most 64 pods at once. Needs root
// and iproute2's `ip`.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::op::testing {

class PodNetwork {
 public:
  struct Pod {
    std::string ip;
    std::string netns;  // the namespace's path, under /run/netns
  };

  // FailedPrecondition when not root.
  static StatusOr<std::unique_ptr<PodNetwork>> Create();
  // Removes every pod's namespace, the bridge and the host's link.
  ~PodNetwork();
  PodNetwork(const PodNetwork&) = delete;
  PodNetwork& operator=(const PodNetwork&) = delete;

  // The host's address on the bridge, e.g. 10.11.133.1.
  const std::string& hostAddress() const { return hostAddress_; }
  // The pod's namespace and address, made on the first call for `key`.
  StatusOr<Pod> AddPod(const std::string& key);
  // The pod's namespace and address; nothing when it has none.
  std::optional<Pod> FindPod(const std::string& key) const;
  // Removes the pod's namespace and frees its address; nothing when unknown.
  void RemovePod(const std::string& key);

  // The network namespaces and root links named for process `pid`.
  static std::vector<std::string> ResourcesOf(pid_t pid);

 private:
  struct PodSlot {
    int index = 0;  // in the names of its namespace and veth
    int octet = 0;  // the address's last byte
    std::string netns;
  };
  explicit PodNetwork(int cluster);
  Status SetUp();

  int cluster_;
  std::string bridgeNs_;  // the namespace holding the bridge
  std::string hostLink_;  // the root namespace's end of the host's veth pair
  std::string prefix_;    // "10.X.Y."
  std::string hostAddress_;
  int nextPod_ = 0;
  mutable std::mutex mu_;  // the kubelet adds and removes pods while tests look them up
  std::map<std::string, PodSlot> pods_;
};

}  // namespace easyscale::op::testing
