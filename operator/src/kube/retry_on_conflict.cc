// Optimistic concurrency: re-get and re-apply on 409 Conflict.
#include "easyscale/common/log.h"
#include "easyscale/operator/kube_client.h"

namespace easyscale::op {
namespace {

StatusOr<nlohmann::json> RetryOnConflict(KubeClient& client, const Resource& r, nlohmann::json obj,
                                         const std::function<void(nlohmann::json&)>& mutate,
                                         int attempts, bool status) {
  Status last;
  for (int i = 0; i < attempts; ++i) {
    mutate(obj);
    StatusOr<nlohmann::json> out = status ? client.UpdateStatus(r, obj) : client.Update(r, obj);
    if (out.ok() || !absl::IsAborted(out.status())) return out;
    last = out.status();
    LogDebug("kube", "conflict; re-reading", {{"object", ObjectKey(obj)}, {"attempt", i + 1}});
    const nlohmann::json& m = obj["metadata"];
    StatusOr<nlohmann::json> fresh = client.Get(r, m.value("namespace", ""), m.value("name", ""));
    if (!fresh.ok()) return fresh.status();
    obj = std::move(*fresh);
  }
  return last;
}

}  // namespace

StatusOr<nlohmann::json> UpdateStatusWithRetry(KubeClient& client, const Resource& r,
                                               nlohmann::json obj,
                                               const std::function<void(nlohmann::json&)>& mutate,
                                               int attempts) {
  return RetryOnConflict(client, r, std::move(obj), mutate, attempts, true);
}

StatusOr<nlohmann::json> UpdateWithRetry(KubeClient& client, const Resource& r, nlohmann::json obj,
                                         const std::function<void(nlohmann::json&)>& mutate,
                                         int attempts) {
  return RetryOnConflict(client, r, std::move(obj), mutate, attempts, false);
}

}  // namespace easyscale::op
