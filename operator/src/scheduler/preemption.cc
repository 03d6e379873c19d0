// Step 1: when inference claims GPUs that training holds on a node, free them
// now, taking them from the workers whose loss of throughput is smallest.
#include <map>
#include <tuple>

#include "phases.h"

namespace easyscale::op::internal {
namespace {

struct Victim {
  int job = -1;
  bool wholeJob = false;  // one worker fewer would leave it below minWorkers
  double loss = 0.0;
};

// Lower priority first, then the smallest loss, then the latest submitted.
bool BetterVictim(const ClusterModel& m, const Victim& a, const Victim& b) {
  const JobDemand& x = *m.jobs[a.job].demand;
  const JobDemand& y = *m.jobs[b.job].demand;
  return std::make_tuple(x.priority, a.loss, -x.submitOrder, a.job) <
         std::make_tuple(y.priority, b.loss, -y.submitOrder, b.job);
}

}  // namespace

std::vector<Preemption> PreemptForInference(ClusterModel* m) {
  std::vector<std::vector<int>> jobsOnSlot(m->slots.size());
  for (size_t j = 0; j < m->jobs.size(); ++j) {
    for (const auto& [slot, w] : m->jobs[j].slotWorkers) jobsOnSlot[slot].push_back(j);
  }
  std::map<std::tuple<std::string, std::string, std::string>, int> freed;  // node, type, job
  for (size_t s = 0; s < m->slots.size(); ++s) {
    const int type = m->slots[s].type;
    while (m->used[s] > m->slots[s].capacity) {
      Victim best;
      for (int j : jobsOnSlot[s]) {
        const JobModel& job = m->jobs[j];
        auto it = job.slotWorkers.find(static_cast<int>(s));
        if (it == job.slotWorkers.end() || it->second == 0) continue;
        Victim v;
        v.job = j;
        v.wholeJob = job.Workers() - 1 < job.minWorkers;
        const double tp = job.Tp();
        v.loss = v.wholeJob ? tp : tp - job.TpWith(type, -1);
        if (best.job < 0 || BetterVictim(*m, v, best)) best = v;
      }
      if (best.job < 0) break;  // over capacity with no training here: nothing to free
      JobModel& job = m->jobs[best.job];
      const std::string& key = job.demand->key;
      if (best.wholeJob) {
        // Below its minimum the job cannot run at all: every worker goes.
        freed[{m->slots[s].node, m->types[type], key}] += job.slotWorkers[s];
        for (const auto& [slot, w] : job.slotWorkers) m->used[slot] -= w;
        job.slotWorkers.clear();
        std::fill(job.counts.begin(), job.counts.end(), 0);
      } else {
        freed[{m->slots[s].node, m->types[type], key}] += 1;
        m->used[s] -= 1;
        job.counts[type] -= 1;
        if (--job.slotWorkers[s] == 0) job.slotWorkers.erase(static_cast<int>(s));
      }
    }
  }
  std::vector<Preemption> out;
  for (const auto& [k, n] : freed) {
    out.push_back(Preemption{std::get<2>(k), std::get<0>(k), std::get<1>(k), n});
  }
  return out;
}

}  // namespace easyscale::op::internal
