#include "baselines.h"

#include <algorithm>
#include <map>

namespace easyscale::sim {
namespace {

// Free GPUs per node and type, after inference and every job's placements.
class FreeGpus {
 public:
  explicit FreeGpus(const op::ClusterState& c) {
    for (const op::NodeGpus& n : c.nodes) {
      free_[{n.node, n.gpuType}] += n.total - n.inferenceHeld - n.inferencePending;
    }
    for (const op::JobDemand& j : c.jobs) {
      for (const op::Placement& p : j.current) free_[{p.node, p.gpuType}] -= p.workers;
    }
  }
  int OfType(const std::string& type) const {
    int n = 0;
    for (const auto& [k, v] : free_) n += k.second == type ? std::max(0, v) : 0;
    return n;
  }
  // Adds `n` workers of `type` to `placements`: first on nodes the job uses,
  // then on the nodes with the most free GPUs. False (nothing taken) if short.
  bool Take(const std::string& type, int n, std::vector<op::Placement>* placements) {
    if (OfType(type) < n) return false;
    auto grow = [&](const std::string& node, int k) {
      free_[{node, type}] -= k;
      n -= k;
      for (op::Placement& p : *placements) {
        if (p.node == node && p.gpuType == type) {
          p.workers += k;
          return;
        }
      }
      placements->push_back(op::Placement{node, type, k});
    };
    for (const op::Placement& p : std::vector<op::Placement>(*placements)) {
      if (p.gpuType == type && n > 0) grow(p.node, std::min(n, std::max(0, free_[{p.node, type}])));
    }
    while (n > 0) {
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->first.second == type && (best == free_.end() || it->second > best->second))
          best = it;
      }
      grow(best->first.first, std::min(n, best->second));
    }
    std::sort(placements->begin(), placements->end(), [](const auto& a, const auto& b) {
      return std::tie(a.node, a.gpuType) < std::tie(b.node, b.gpuType);
    });
    return true;
  }

 private:
  std::map<std::pair<std::string, std::string>, int> free_;
};

std::vector<std::string> ClusterTypes(const op::ClusterState& c) {
  std::vector<std::string> types;
  for (const op::NodeGpus& n : c.nodes) types.push_back(n.gpuType);
  std::sort(types.begin(), types.end());
  types.erase(std::unique(types.begin(), types.end()), types.end());
  return types;
}

bool Allows(const op::JobDemand& j, const std::string& type) {
  return j.gpuTypes.empty() ||
         std::find(j.gpuTypes.begin(), j.gpuTypes.end(), type) != j.gpuTypes.end();
}

int Workers(const std::vector<op::Placement>& placements) {
  int n = 0;
  for (const op::Placement& p : placements) n += p.workers;
  return n;
}

double IdleFraction(const op::JobDemand& j, const std::vector<op::Placement>& placements,
                    const op::SchedulerOptions& o) {
  double useful = 0.0;
  int workers = 0;
  for (const op::GpuTypeUse& u : op::PredictGpuUse(j, placements, o)) {
    useful += u.usefulFraction * u.workers;
    workers += u.workers;
  }
  return workers > 0 ? 1.0 - useful / workers : 1.0;
}

// Jobs in submit order (the input order breaks ties).
std::vector<size_t> SubmitOrder(const op::ClusterState& c) {
  std::vector<size_t> order(c.jobs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return c.jobs[a].submitOrder < c.jobs[b].submitOrder;
  });
  return order;
}

op::ScheduleResult Finish(const op::ClusterState& c, std::vector<std::vector<op::Placement>> plans,
                          const op::SchedulerOptions& o) {
  op::ScheduleResult r;
  for (size_t i = 0; i < c.jobs.size(); ++i) {
    op::JobAllocation a;
    a.job = c.jobs[i].key;
    a.placements = std::move(plans[i]);
    a.throughput = op::PredictThroughput(c.jobs[i], a.placements, o);
    r.totalThroughput += a.throughput;
    r.allocations.push_back(std::move(a));
  }
  return r;
}

struct StepUp {
  double score = 0.0;  // relative speedup per added GPU
  size_t job = 0;
  std::string type;
  int gpus = 0;
};

}  // namespace

op::ScheduleResult PaperPolicy(const op::ClusterState& c, const op::SchedulerOptions& o) {
  FreeGpus free(c);
  const std::vector<std::string> types = ClusterTypes(c);
  std::vector<std::vector<op::Placement>> plans;
  for (const op::JobDemand& j : c.jobs) plans.push_back(j.current);

  // Step-ups are proposed against the GPUs held before this round.
  std::vector<StepUp> steps;
  for (size_t i = 0; i < c.jobs.size(); ++i) {
    const op::JobDemand& j = c.jobs[i];
    const int held = Workers(j.current);
    if (held == 0) continue;
    const double tp = op::PredictThroughput(j, j.current, o);
    for (const std::string& type : types) {
      if (!Allows(j, type)) continue;
      StepUp best;
      for (int k = 1; held + k <= std::min(2 * held, j.maxWorkers); ++k) {
        std::vector<op::Placement> plan = j.current;
        plan.push_back(op::Placement{"", type, k});  // per-type counts are what matter here
        const double after = op::PredictThroughput(j, plan, o);
        if (!(after > tp * (1.0 + 1e-12)) || IdleFraction(j, plan, o) > o.maxIdleFraction) continue;
        const double score = (after / tp - 1.0) / k;
        if (best.gpus == 0 || score > best.score) best = StepUp{score, i, type, k};
      }
      if (best.gpus > 0) steps.push_back(best);
    }
  }
  // New jobs first, in submit order: the lowest proposal.
  for (size_t i : SubmitOrder(c)) {
    const op::JobDemand& j = c.jobs[i];
    if (!plans[i].empty()) continue;
    std::string slowest;
    for (const std::string& type : types) {
      if (!Allows(j, type) || free.OfType(type) == 0) continue;
      if (slowest.empty() || op::PredictThroughput(j, {{"", type, 1}}, o) <
                                 op::PredictThroughput(j, {{"", slowest, 1}}, o)) {
        slowest = type;
      }
    }
    if (!slowest.empty()) free.Take(slowest, 1, &plans[i]);
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const StepUp& a, const StepUp& b) { return a.score > b.score; });
  std::vector<bool> stepped(c.jobs.size(), false);
  for (const StepUp& s : steps) {
    if (stepped[s.job]) continue;
    if (free.Take(s.type, s.gpus, &plans[s.job])) stepped[s.job] = true;
  }
  return Finish(c, std::move(plans), o);
}

op::ScheduleResult YarnCs(const op::ClusterState& c, const op::SchedulerOptions& o) {
  FreeGpus free(c);
  std::vector<std::vector<op::Placement>> plans(c.jobs.size());
  const std::vector<size_t> order = SubmitOrder(c);
  if (!order.empty()) {
    const size_t head = order.front();
    const op::JobDemand& j = c.jobs[head];
    plans[head] = j.current;
    if (plans[head].empty()) {
      const std::string type = j.gpuTypes.empty() ? ClusterTypes(c).front() : j.gpuTypes.front();
      int total = 0;
      for (const op::NodeGpus& n : c.nodes) total += n.gpuType == type ? n.total : 0;
      free.Take(type, std::min(j.maxWorkers, total), &plans[head]);
    }
  }
  return Finish(c, std::move(plans), o);
}

}  // namespace easyscale::sim
