// The scheduler's input, built from the informer caches: every active job with
// what it holds now, and every node's GPUs minus inference and draining pods.
#include <algorithm>
#include <set>

#include "controller/generation_plan.h"
#include "controller/gpu_inventory.h"
#include "controller/job_controller.h"
#include "easyscale/common/log.h"

namespace easyscale::op {

using nlohmann::json;

ClusterState JobController::BuildCluster(const std::string& key, const JobStatus& self,
                                         size_t* selfIndex) {
  struct Entry {
    std::string created;
    std::string key;
    JobDemand demand;
  };
  std::vector<Entry> entries;
  std::map<std::string, std::set<std::string>> members;  // job key -> its planned pods
  for (const json& cached : jobs_.List()) {
    const std::string k = ObjectKey(cached);
    const json job = k == key ? cached : Freshest(k, cached);
    if (k != key && job["metadata"].contains("deletionTimestamp")) continue;
    StatusOr<JobSpec> spec = ParseJobSpec(cached.value("spec", json()), "spec");
    if (!spec.ok()) continue;
    JobStatus st;
    if (k == key) {
      st = self;
    } else {
      StatusOr<JobStatus> parsed = ParseJobStatus(job.value("status", json()));
      if (!parsed.ok()) continue;
      st = *parsed;
    }
    if (st.phase == "Succeeded" || st.phase == "Failed") continue;
    for (const WorkerRecord& w : st.workers) members[k].insert(w.pod);
    JobDemand d;
    d.key = k;
    d.ests = spec->ests;
    d.minWorkers = spec->minWorkers;
    d.maxWorkers = spec->maxWorkers > 0 ? spec->maxWorkers : spec->ests;
    d.priority = spec->priority;
    d.gpuTypes = spec->gpuTypes;
    d.speed = CompleteSpeeds(st.speed, options_.scheduler);
    d.current = ToPlacements(CountWorkers(st.workers));
    entries.push_back({cached["metadata"].value("creationTimestamp", ""), k, std::move(d)});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.created, a.key) < std::tie(b.created, b.key);
  });

  // Worker pods outside their job's plan (draining, or being removed) still hold their GPU,
  // until they have ended or gone.
  std::map<std::string, std::map<std::string, int>> unavailable;
  const std::vector<json> pods = pods_.List();
  for (const json& p : pods) {
    if (!IsWorkerPod(p) || !PodClaimsGpus(p)) continue;
    const json& m = p["metadata"];
    const std::string job = m.value("namespace", "") + "/" + m["labels"].value(kJobLabel, "");
    auto it = members.find(job);
    if (it != members.end() && it->second.count(m.value("name", "")) != 0) continue;
    const std::string node = p.value("spec", json::object()).value("nodeName", "");
    if (!node.empty()) ++unavailable[node][m["labels"].value(kGpuTypeLabel, "")];
  }

  ClusterState cluster;
  cluster.nodes = BuildNodeGpus(nodes_.List(), pods, unavailable);
  *selfIndex = entries.size();
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].demand.submitOrder = static_cast<int64_t>(i);
    if (entries[i].key == key) *selfIndex = i;
    cluster.jobs.push_back(std::move(entries[i].demand));
  }
  return cluster;
}

}  // namespace easyscale::op
