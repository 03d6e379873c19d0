// The scheduling cycle's input and output: every active job with what it
// holds now, every node's GPUs minus inference and draining pods; then the
// jobs whose plan differs from what they hold are queued to apply it.
#include <algorithm>
#include <set>

#include "controller/generation_plan.h"
#include "controller/gpu_inventory.h"
#include "controller/job_controller.h"
#include "easyscale/common/log.h"

namespace easyscale::op {

ClusterState JobController::BuildCluster() {
  struct Entry {
    std::string created;
    std::string key;
    JobDemand demand;
  };
  std::vector<Entry> entries;
  std::map<std::string, std::set<std::string>> members;  // job key -> its planned pods
  GpusByNodeAndType planned;                             // the members' GPUs
  for (const JobPtr& cached : cache_.Jobs()) {
    const JobPtr job = Freshest(cached);
    if (job->deleting || !job->spec.ok() || !job->status.ok()) continue;
    const JobSpec& spec = *job->spec;
    const JobStatus& st = *job->status;
    if (IsTerminal(st.phase) || spec.suspend) continue;  // a suspended job asks for nothing
    for (const WorkerRecord& w : st.workers) {
      members[job->key].insert(w.pod);
      ++planned[w.node][w.gpuType];
    }
    entries.push_back(
        {job->creationTimestamp, job->key, DemandOf(job->key, spec, st, options_.scheduler)});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.created, a.key) < std::tie(b.created, b.key);
  });

  // Worker pods outside their job's plan (draining, or being removed) still hold their GPU,
  // until they have ended or gone.
  GpusByNodeAndType unavailable;
  const std::vector<PodPtr> pods = cache_.Pods();
  for (const PodPtr& p : pods) {
    if (p->role != PodRole::kWorker || !p->ClaimsGpus()) continue;
    auto it = members.find(p->JobKey());
    if (it != members.end() && it->second.count(p->name) != 0) continue;
    if (!p->boundNode.empty()) ++unavailable[p->boundNode][p->gpuType];
  }

  ClusterState cluster;
  cluster.nodes = BuildNodeGpus(cache_.Nodes(), pods, unavailable, planned);
  cluster.jobs.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].demand.submitOrder = static_cast<int64_t>(i);
    cluster.jobs.push_back(std::move(entries[i].demand));
  }
  return cluster;
}

void JobController::RunSchedulingCycle() {
  cycle_.Begin();
  const auto t0 = std::chrono::steady_clock::now();
  const ClusterState cluster = BuildCluster();
  const ScheduleResult result = cycle_.Run(cluster);
  metrics_->ObserveSchedule(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  int changed = 0;
  for (size_t i = 0; i < result.allocations.size(); ++i) {
    if (CountPlacements(result.allocations[i].placements) !=
        CountPlacements(cluster.jobs[i].current)) {
      queue_.Add(cluster.jobs[i].key);
      ++changed;
    }
  }
  // A worker on a GPU inference was given must go even when the counts stay.
  for (const NodePtr& n : cache_.Nodes()) {
    for (const std::string& worker : n->inventory.workersBesideInference) {
      if (const PodPtr p = cache_.Pod(worker); p != nullptr && p->role == PodRole::kWorker) {
        queue_.Add(p->JobKey());
      }
    }
  }
  LogDebug("controller", "scheduling cycle",
           {{"cycle", cycle_.cycles()},
            {"jobs", static_cast<int64_t>(cluster.jobs.size())},
            {"changed", changed},
            {"preemptions", static_cast<int64_t>(result.preemptions.size())}});
}

}  // namespace easyscale::op
