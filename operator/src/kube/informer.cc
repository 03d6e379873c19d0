// List, watch, relist: the reflector loop behind Informer.
#include "easyscale/operator/informer.h"

#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"
#include "easyscale/operator/backoff.h"

namespace easyscale::op {

using nlohmann::json;

Informer::Informer(KubeClient* client, Resource resource, InformerOptions options)
    : client_(client), resource_(std::move(resource)), options_(std::move(options)) {}

Informer::~Informer() { Stop(); }

void Informer::AddHandlers(InformerHandlers h) { handlers_.push_back(std::move(h)); }

void Informer::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  {
    std::lock_guard<std::mutex> lock(stopMu_);
    stopped_ = true;
  }
  stopCv_.notify_all();
  canceller_.Cancel();
  if (thread_.joinable()) thread_.join();
}

bool Informer::SleepUnlessStopped(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(stopMu_);
  return !stopCv_.wait_for(lock, d, [&] { return stopped_.load(); });
}

std::optional<json> Informer::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = store_.find(key);
  if (it == store_.end()) return std::nullopt;
  return it->second;
}

std::vector<json> Informer::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  out.reserve(store_.size());
  for (const auto& [k, v] : store_) out.push_back(v);
  return out;
}

std::string Informer::LastResourceVersion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lastRv_;
}

void Informer::Run() {
  Backoff backoff(options_.initialBackoff, options_.maxBackoff);
  while (!stopped_) {
    Status s = ListAndReplace();
    if (!s.ok()) {
      if (stopped_) break;
      const auto d = backoff.Next();
      LogWarn("informer", "list failed; retrying",
              {{"resource", resource_.plural}, {"error", s.ToString()}, {"backoffMs", d.count()}});
      SleepUnlessStopped(d);
      continue;
    }
    backoff.Reset();
    while (!stopped_) {
      s = WatchFromLast();
      if (stopped_) break;
      if (absl::IsOutOfRange(s)) {  // 410 Gone: our resourceVersion is too old
        LogInfo("informer", "watch expired; relisting", {{"resource", resource_.plural}});
        break;
      }
      if (s.ok()) {  // the server closed the stream (timeout): resume
        backoff.Reset();
        continue;
      }
      const auto d = backoff.Next();
      LogWarn("informer", "watch failed; resuming after backoff",
              {{"resource", resource_.plural}, {"error", s.ToString()}, {"backoffMs", d.count()}});
      SleepUnlessStopped(d);
    }
  }
}

Status Informer::ListAndReplace() {
  ES_ASSIGN_OR_RETURN(json list, client_->List(resource_, options_.ns,
                                               {options_.labelSelector, options_.fieldSelector}));
  ++relists_;
  std::map<std::string, json> fresh;
  for (json& item : list["items"]) {
    const std::string key = ObjectKey(item);
    fresh[key] = std::move(item);
  }
  std::vector<std::pair<json, json>> updates;  // old, new (old null = added)
  std::vector<json> deletes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, obj] : fresh) {
      auto it = store_.find(key);
      if (it == store_.end()) {
        updates.emplace_back(json(), obj);
      } else if (ResourceVersionOf(it->second) != ResourceVersionOf(obj)) {
        updates.emplace_back(it->second, obj);
      }
    }
    for (const auto& [key, obj] : store_) {
      if (fresh.count(key) == 0) deletes.push_back(obj);
    }
    store_ = std::move(fresh);
    lastRv_ = list["metadata"].value("resourceVersion", "");
  }
  for (const json& d : deletes) {
    for (auto& h : handlers_)
      if (h.onDelete) h.onDelete(d);
  }
  for (const auto& [old, now] : updates) {
    for (auto& h : handlers_) {
      if (old.is_null() && h.onAdd) h.onAdd(now);
      if (!old.is_null() && h.onUpdate) h.onUpdate(old, now);
    }
  }
  synced_ = true;
  return absl::OkStatus();
}

Status Informer::WatchFromLast() {
  WatchOptions o;
  o.resourceVersion = LastResourceVersion();
  o.labelSelector = options_.labelSelector;
  o.fieldSelector = options_.fieldSelector;
  o.timeoutSeconds = options_.watchTimeoutSeconds;
  return client_->Watch(
      resource_, options_.ns, o,
      [this](const WatchEvent& e) {
        Apply(e);
        return !stopped_.load();
      },
      &canceller_);
}

void Informer::Apply(const WatchEvent& e) {
  const std::string rv = ResourceVersionOf(e.object);
  if (e.type == "BOOKMARK") {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rv.empty()) lastRv_ = rv;
    return;
  }
  const std::string key = ObjectKey(e.object);
  json old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!rv.empty()) lastRv_ = rv;
    auto it = store_.find(key);
    if (it != store_.end()) old = it->second;
    if (e.type == "DELETED") {
      if (it == store_.end()) return;
      store_.erase(it);
    } else {
      if (!old.is_null() && ResourceVersionOf(old) == rv) return;  // nothing new
      store_[key] = e.object;
    }
  }
  for (auto& h : handlers_) {
    if (e.type == "DELETED") {
      if (h.onDelete) h.onDelete(e.object);
    } else if (old.is_null()) {
      if (h.onAdd) h.onAdd(e.object);
    } else if (h.onUpdate) {
      h.onUpdate(old, e.object);
    }
  }
}

bool WaitForSync(const std::vector<const Informer*>& informers, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool all = true;
    for (const Informer* i : informers) all = all && i->HasSynced();
    if (all) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace easyscale::op
