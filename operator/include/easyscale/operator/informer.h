// File: easyscale/operator/informer.h
//
// A shared-informer for one resource: lists, then watches from the list's
// resourceVersion (with bookmarks), keeps an in-memory cache keyed "ns/name",
// and calls handlers on changes. A watch that ends is resumed from the last
// resourceVersion seen; 410 Gone (HTTP or an ERROR event) relists; errors back
// off exponentially with jitter. Updates with an unchanged resourceVersion are
// dropped. Handlers run on the informer's thread and should only enqueue keys.
//   Informer pods(&client, kPods, {});
//   pods.AddHandlers({.onAdd = [&](const json& o) { queue.Add(ObjectKey(o)); }});
//   pods.Start();  ... WaitForSync({&pods, &jobs}, timeout);
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "easyscale/operator/kube_client.h"

namespace easyscale::op {

struct InformerHandlers {
  std::function<void(const nlohmann::json&)> onAdd;
  std::function<void(const nlohmann::json& old, const nlohmann::json& now)> onUpdate;
  std::function<void(const nlohmann::json&)> onDelete;
};

struct InformerOptions {
  std::string ns;  // empty = all namespaces
  std::string labelSelector;
  std::string fieldSelector;
  std::chrono::milliseconds initialBackoff{100};
  std::chrono::milliseconds maxBackoff{std::chrono::seconds(10)};
  int watchTimeoutSeconds = 300;
};

class Informer {
 public:
  Informer(KubeClient* client, Resource resource, InformerOptions options);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void AddHandlers(InformerHandlers h);  // before Start
  void Start();
  void Stop();  // safe to call twice

  bool HasSynced() const { return synced_.load(); }
  std::optional<nlohmann::json> Get(const std::string& key) const;
  std::vector<nlohmann::json> List() const;
  std::string LastResourceVersion() const;
  int64_t relists() const { return relists_.load(); }
  const Resource& resource() const { return resource_; }

 private:
  void Run();
  Status ListAndReplace();
  Status WatchFromLast();
  void Apply(const WatchEvent& e);
  bool SleepUnlessStopped(std::chrono::milliseconds d);

  KubeClient* client_;
  Resource resource_;
  InformerOptions options_;
  std::vector<InformerHandlers> handlers_;
  mutable std::mutex mu_;
  std::map<std::string, nlohmann::json> store_;
  std::string lastRv_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> relists_{0};
  std::condition_variable stopCv_;
  std::mutex stopMu_;
  WatchCanceller canceller_;
  std::thread thread_;
};

// True once every informer has synced; false after `timeout`.
bool WaitForSync(const std::vector<const Informer*>& informers, std::chrono::milliseconds timeout);

}  // namespace easyscale::op
