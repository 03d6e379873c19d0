// The acquire/renew loop of LeaderElector.
#include "easyscale/operator/leader_election.h"

#include <cmath>

#include "easyscale/common/log.h"
#include "easyscale/operator/kube_time.h"

namespace easyscale::op {

using nlohmann::json;

LeaderElector::LeaderElector(KubeClient* client, LeaderElectionConfig config)
    : client_(client), config_(std::move(config)) {}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void LeaderElector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LeaderElector::Sleep(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return stopped_.load(); });
}

void LeaderElector::Run() {
  auto lastRenew = std::chrono::steady_clock::now();
  while (!stopped_) {
    const bool held = TryAcquireOrRenew();
    const auto now = std::chrono::steady_clock::now();
    if (held) {
      lastRenew = now;
      if (!leader_.exchange(true)) {
        LogInfo("leader", "became leader",
                {{"lease", config_.ns + "/" + config_.name}, {"identity", config_.identity}});
        if (config_.onStartedLeading) config_.onStartedLeading();
      }
    } else if (leader_ && now - lastRenew > config_.renewDeadline) {
      leader_ = false;
      LogWarn("leader", "lost leadership: could not renew the lease",
              {{"identity", config_.identity}});
      if (config_.onStoppedLeading) config_.onStoppedLeading();
    }
    Sleep(config_.retryPeriod);
  }
  if (leader_) {
    Release();
    leader_ = false;
    if (config_.onStoppedLeading) config_.onStoppedLeading();
  }
}

bool LeaderElector::TryAcquireOrRenew() {
  const auto now = std::chrono::steady_clock::now();
  const std::string nowText = FormatMicroTime(WallClock::now());
  const int durationSeconds =
      static_cast<int>(std::ceil(std::chrono::duration<double>(config_.leaseDuration).count()));
  StatusOr<json> lease = client_->Get(kLeases, config_.ns, config_.name);
  if (absl::IsNotFound(lease.status())) {
    const json obj = {{"apiVersion", "coordination.k8s.io/v1"},
                      {"kind", "Lease"},
                      {"metadata", {{"name", config_.name}, {"namespace", config_.ns}}},
                      {"spec",
                       {{"holderIdentity", config_.identity},
                        {"leaseDurationSeconds", durationSeconds},
                        {"acquireTime", nowText},
                        {"renewTime", nowText},
                        {"leaseTransitions", 0}}}};
    StatusOr<json> created = client_->Create(kLeases, config_.ns, obj);
    if (created.ok()) {
      observedSpec_ = (*created)["spec"];
      observedAt_ = now;
    }
    return created.ok();
  }
  if (!lease.ok()) {
    LogWarn("leader", "cannot read the lease", {{"error", lease.status().ToString()}});
    return false;
  }
  json spec = lease->value("spec", json::object());
  if (spec != observedSpec_) {  // the holder renewed (or changed): restart its clock
    observedSpec_ = spec;
    observedAt_ = now;
  }
  const std::string holder = spec.value("holderIdentity", "");
  if (holder != lastLeader_) {
    lastLeader_ = holder;
    if (config_.onNewLeader) config_.onNewLeader(holder);
  }
  if (!holder.empty() && holder != config_.identity && now < observedAt_ + config_.leaseDuration) {
    return false;  // someone else holds a live lease
  }
  json next = *lease;
  next["spec"]["holderIdentity"] = config_.identity;
  next["spec"]["leaseDurationSeconds"] = durationSeconds;
  next["spec"]["renewTime"] = nowText;
  if (holder != config_.identity) {
    next["spec"]["acquireTime"] = nowText;
    next["spec"]["leaseTransitions"] = spec.value("leaseTransitions", 0) + 1;
  }
  StatusOr<json> updated = client_->Update(kLeases, next);  // conditional on resourceVersion
  if (!updated.ok()) {
    if (!absl::IsAborted(updated.status())) {
      LogWarn("leader", "cannot update the lease", {{"error", updated.status().ToString()}});
    }
    return false;
  }
  observedSpec_ = (*updated)["spec"];
  observedAt_ = now;
  return true;
}

void LeaderElector::Release() {
  StatusOr<json> lease = client_->Get(kLeases, config_.ns, config_.name);
  if (!lease.ok() || (*lease)["spec"].value("holderIdentity", "") != config_.identity) return;
  json next = *lease;
  next["spec"]["holderIdentity"] = "";
  next["spec"]["leaseDurationSeconds"] = 1;
  next["spec"]["renewTime"] = FormatMicroTime(WallClock::now());
  if (client_->Update(kLeases, next).ok()) {
    LogInfo("leader", "released the lease", {{"identity", config_.identity}});
  }
}

}  // namespace easyscale::op
