// The typed informer caches and what each change means for the controller.
#include "controller/cluster_cache.h"

#include <cmath>

#include "controller/generation_plan.h"
#include "easyscale/operator/kube_client.h"

namespace easyscale::op {

using nlohmann::json;

namespace {

// What the scheduler reads of a pod: whether and where it holds GPUs.
bool SamePodGpus(const PodView& a, const PodView& b) {
  return a.role == b.role && a.ClaimsGpus() == b.ClaimsGpus() &&
         (a.phase == PodPhase::kRunning) == (b.phase == PodPhase::kRunning) &&
         a.Terminated() == b.Terminated() && a.node == b.node && a.boundNode == b.boundNode &&
         a.gpuType == b.gpuType && a.gpuTypeSelector == b.gpuTypeSelector &&
         a.inferenceGpus == b.inferenceGpus;
}

// Measured speeds move a little with every report; a change under 1% is
// noise to a scheduler that moves GPUs only for a 5% gain (minGain).
bool SameSpeeds(const std::map<std::string, double>& a, const std::map<std::string, double>& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
    if (i->first != j->first ||
        std::abs(i->second - j->second) > 0.01 * std::max(i->second, j->second)) {
      return false;
    }
  }
  return true;
}

template <typename Map>
std::vector<typename Map::mapped_type> Values(const Map& map) {
  std::vector<typename Map::mapped_type> out;
  out.reserve(map.size());
  for (const auto& [key, value] : map) out.push_back(value);
  return out;
}

// The cached object under `key`, or null.
template <typename Map>
typename Map::mapped_type Find(const Map& map, const std::string& key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : it->second;
}

}  // namespace

bool IsWorkerOf(const PodView& pod, const JobView& job) {
  return pod.role == PodRole::kWorker && pod.ns == job.ns && pod.job == job.name &&
         pod.ownerUid == job.uid;
}

bool SameSchedulingInputs(const JobView& a, const JobView& b) {
  if (a.deleting != b.deleting || a.uid != b.uid || a.spec.ok() != b.spec.ok() ||
      a.status.ok() != b.status.ok()) {
    return false;
  }
  if (a.spec.ok()) {
    const JobSpec& x = *a.spec;
    const JobSpec& y = *b.spec;
    if (x.ests != y.ests || x.minWorkers != y.minWorkers || x.maxWorkers != y.maxWorkers ||
        x.priority != y.priority || x.gpuTypes != y.gpuTypes || x.suspend != y.suspend) {
      return false;
    }
  }
  if (a.status.ok()) {
    const JobStatus& x = *a.status;
    const JobStatus& y = *b.status;
    if (IsTerminal(x.phase) != IsTerminal(y.phase) ||
        CountWorkers(x.workers) != CountWorkers(y.workers) || !SameSpeeds(x.speed, y.speed)) {
      return false;
    }
    // Pods outside the plan hold GPUs until they end: membership matters too.
    auto pods = [](const JobStatus& s) {
      std::vector<std::string> out;
      for (const WorkerRecord& w : s.workers) out.push_back(w.pod);
      return out;
    };
    if (pods(x) != pods(y)) return false;
  }
  return true;
}

ClusterChange ClusterCache::ApplyJob(const json& job) {
  auto view = std::make_shared<const JobView>(ParseJob(job));
  ClusterChange change{view->key, true};
  std::lock_guard<std::mutex> lock(mu_);
  JobPtr& slot = jobs_[view->key];
  change.schedulingInput = slot == nullptr || !SameSchedulingInputs(*slot, *view);
  slot = std::move(view);
  return change;
}

ClusterChange ClusterCache::RemoveJob(const json& job) {
  const std::string key = ObjectKey(job);
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.erase(key);
  return {key, true};
}

ClusterChange ClusterCache::ApplyPod(const json& pod) {
  auto view = std::make_shared<const PodView>(ParsePod(pod));
  if (view->role == PodRole::kOther) return RemovePod(pod);  // a label may have changed
  ClusterChange change;
  if (view->role == PodRole::kWorker) change.job = view->JobKey();
  std::lock_guard<std::mutex> lock(mu_);
  PodPtr& slot = pods_[view->key];
  change.schedulingInput = slot == nullptr || !SamePodGpus(*slot, *view);
  if (slot != nullptr && slot->role == PodRole::kWorker && slot->JobKey() != view->JobKey()) {
    workersByJob_[slot->JobKey()].erase(slot->key);
  }
  if (view->role == PodRole::kWorker) workersByJob_[view->JobKey()][view->key] = view;
  slot = std::move(view);
  return change;
}

ClusterChange ClusterCache::RemovePod(const json& pod) {
  const std::string key = ObjectKey(pod);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pods_.find(key);
  if (it == pods_.end()) return {};
  ClusterChange change{"", true};
  if (it->second->role == PodRole::kWorker) {
    change.job = it->second->JobKey();
    auto byJob = workersByJob_.find(change.job);
    if (byJob != workersByJob_.end()) {
      byJob->second.erase(key);
      if (byJob->second.empty()) workersByJob_.erase(byJob);
    }
  }
  pods_.erase(it);
  return change;
}

ClusterChange ClusterCache::ApplyNode(const json& node) {
  auto view = std::make_shared<const NodeView>(ParseNode(node));
  std::lock_guard<std::mutex> lock(mu_);
  NodePtr& slot = nodes_[view->name];
  ClusterChange change{"", slot == nullptr || !(*slot == *view)};
  slot = std::move(view);
  return change;
}

ClusterChange ClusterCache::RemoveNode(const json& node) {
  std::lock_guard<std::mutex> lock(mu_);
  return {"", nodes_.erase(ParseNode(node).name) != 0};
}

JobPtr ClusterCache::Job(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Find(jobs_, key);
}

std::vector<JobPtr> ClusterCache::Jobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Values(jobs_);
}

PodPtr ClusterCache::Pod(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Find(pods_, key);
}

std::vector<PodPtr> ClusterCache::Pods() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Values(pods_);
}

std::map<std::string, PodPtr> ClusterCache::WorkerPodsOf(const JobView& job) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, PodPtr> out;
  auto it = workersByJob_.find(job.key);
  if (it == workersByJob_.end()) return out;
  for (const auto& [key, p] : it->second) {
    if (IsWorkerOf(*p, job)) out.emplace(p->name, p);
  }
  return out;
}

std::vector<NodePtr> ClusterCache::Nodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Values(nodes_);
}

NodePtr ClusterCache::Node(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return Find(nodes_, name);
}

}  // namespace easyscale::op
