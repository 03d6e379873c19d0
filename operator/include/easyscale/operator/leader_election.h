// File: easyscale/operator/leader_election.h
//
// Leader election through a coordination.k8s.io/v1 Lease, as client-go's
// leaderelection package does it: the leader renews spec.renewTime every
// retryPeriod; a candidate takes the Lease over once it has seen the same
// record unchanged for leaseDuration (measured on its own clock, so clock skew
// between nodes does not matter). A leader that cannot renew within
// renewDeadline stops leading. Stop() while leading releases the Lease so a
// standby takes over at once.
//   LeaderElector e(&client, {.ns = "kube-system", .name = "easyscale-operator",
//                             .identity = hostname, .onStartedLeading = ...});
//   e.Start();
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "easyscale/operator/kube_client.h"

namespace easyscale::op {

struct LeaderElectionConfig {
  std::string ns = "default";
  std::string name = "easyscale-operator";
  std::string identity;
  std::chrono::milliseconds leaseDuration{std::chrono::seconds(15)};
  std::chrono::milliseconds renewDeadline{std::chrono::seconds(10)};
  std::chrono::milliseconds retryPeriod{std::chrono::seconds(2)};
  std::function<void()> onStartedLeading;
  std::function<void()> onStoppedLeading;
  std::function<void(const std::string&)> onNewLeader;
};

class LeaderElector {
 public:
  LeaderElector(KubeClient* client, LeaderElectionConfig config);
  ~LeaderElector();
  void Start();
  void Stop();  // releases the Lease when leading; safe to call twice
  bool IsLeader() const { return leader_.load(); }

 private:
  void Run();
  // One attempt to take or renew the Lease; true while we hold it.
  bool TryAcquireOrRenew();
  void Release();
  bool Sleep(std::chrono::milliseconds d);

  KubeClient* client_;
  LeaderElectionConfig config_;
  std::atomic<bool> leader_{false};
  std::atomic<bool> stopped_{false};
  nlohmann::json observedSpec_;
  std::chrono::steady_clock::time_point observedAt_;
  std::string lastLeader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace easyscale::op
