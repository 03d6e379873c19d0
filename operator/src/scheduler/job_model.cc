#include "job_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>

namespace easyscale::op::internal {
namespace {

// ESTs the workers can finish within step time `t`.
long Capacity(double t, const std::vector<int>& counts, const std::vector<double>& speeds) {
  long total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    // The epsilon absorbs rounding in c / s * s, so a worker whose own time is
    // exactly t counts its last EST.
    const long per = static_cast<long>(std::floor(t * speeds[i] + 1e-9));
    total += static_cast<long>(counts[i]) * std::max(1L, per);
  }
  return total;
}

}  // namespace

double StepTime(int ests, const std::vector<int>& counts, const std::vector<double>& speeds) {
  long workers = 0;
  int types = 0;
  double only = 0.0;
  double lower = 0.0;  // every worker runs at least one EST
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] <= 0) continue;
    if (!(speeds[i] > 0.0)) return kInfinity;
    workers += counts[i];
    ++types;
    only = speeds[i];
    lower = std::max(lower, 1.0 / speeds[i]);
  }
  if (workers == 0 || workers > ests) return kInfinity;
  if (types == 1) return ((ests + workers - 1) / workers) / only;  // one type: even split
  if (Capacity(lower, counts, speeds) >= ests) return lower;
  // The optimum is c / s_t for some type t: the moment a worker of type t
  // finishes its c-th EST. Per type, the smallest such c is found by bisection
  // since Capacity grows with time.
  double best = kInfinity;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] <= 0) continue;
    int lo = 1, hi = ests;
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (Capacity(mid / speeds[i], counts, speeds) >= ests) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    best = std::min(best, lo / speeds[i]);
  }
  return best;
}

double Throughput(int ests, const std::vector<int>& counts, const std::vector<double>& speeds) {
  const double t = StepTime(ests, counts, speeds);
  return std::isfinite(t) ? ests / t : 0.0;
}

StepUse UseInStep(int ests, const std::vector<int>& counts, const std::vector<double>& speeds) {
  StepUse use;
  use.busy.assign(counts.size(), 0.0);
  std::vector<int> held(counts.size(), 0);
  int left = ests;
  for (size_t t = 0; t < counts.size(); ++t) {
    if (counts[t] <= 0) continue;
    if (!(speeds[t] > 0.0)) return use;
    held[t] = counts[t];
    left -= counts[t];
  }
  if (left < 0 || left == ests) return use;  // more workers than ESTs, or none
  // Per type the ESTs spread evenly, so the next one lands on a worker holding
  // floor(held / count) and finishes at (that + 1) / speed.
  for (; left > 0; --left) {
    int best = -1;
    double bestEnd = kInfinity;
    for (size_t t = 0; t < counts.size(); ++t) {
      if (counts[t] <= 0) continue;
      const double end = (held[t] / counts[t] + 1) / speeds[t];
      if (end < bestEnd) {
        best = static_cast<int>(t);
        bestEnd = end;
      }
    }
    ++held[best];
  }
  use.stepTime = 0.0;
  for (size_t t = 0; t < counts.size(); ++t) {
    if (counts[t] <= 0) continue;
    use.busy[t] = held[t] / speeds[t];
    use.stepTime = std::max(use.stepTime, ((held[t] + counts[t] - 1) / counts[t]) / speeds[t]);
  }
  return use;
}

double StepUse::IdleFraction(const std::vector<int>& counts) const {
  if (!std::isfinite(stepTime) || stepTime <= 0.0) return 0.0;
  double allocated = 0.0, used = 0.0;
  for (size_t t = 0; t < counts.size(); ++t) {
    if (counts[t] <= 0) continue;
    allocated += counts[t] * stepTime;
    used += busy[t];
  }
  return allocated > 0.0 ? std::max(0.0, 1.0 - used / allocated) : 0.0;
}

double SpeedOf(const JobDemand& job, const std::string& type, const SchedulerOptions& options) {
  if (auto it = job.speed.find(type); it != job.speed.end()) {
    if (it->second > 0.0 && std::isfinite(it->second)) return it->second;
  }
  if (auto it = options.defaultSpeed.find(type); it != options.defaultSpeed.end()) {
    if (it->second > 0.0 && std::isfinite(it->second)) return it->second;
  }
  return options.unknownTypeSpeed;
}

bool AllowsType(const JobDemand& job, const std::string& type) {
  return job.gpuTypes.empty() ||
         std::find(job.gpuTypes.begin(), job.gpuTypes.end(), type) != job.gpuTypes.end();
}

int JobModel::Workers() const {
  int n = 0;
  for (int c : counts) n += c;
  return n;
}

double JobModel::TpWith(int type, int delta) const {
  std::vector<int> c = counts;
  c[type] += delta;
  return Throughput(ests, c, speed);
}

bool JobModel::ServedBefore(const JobModel& other) const {
  const JobDemand& a = *demand;
  const JobDemand& b = *other.demand;
  return std::make_tuple(-a.priority, a.submitOrder, a.key, input) <
         std::make_tuple(-b.priority, b.submitOrder, b.key, other.input);
}

int ClusterModel::TypeIndex(const std::string& name) const {
  auto it = std::lower_bound(types.begin(), types.end(), name);
  return it != types.end() && *it == name ? static_cast<int>(it - types.begin()) : -1;
}

int ClusterModel::SlotIndex(const std::string& node, const std::string& type) const {
  const int t = TypeIndex(type);
  if (t < 0) return -1;
  auto it = std::lower_bound(slots.begin(), slots.end(), std::make_pair(node, t),
                             [](const Slot& s, const std::pair<std::string, int>& k) {
                               return std::tie(s.node, s.type) < std::tie(k.first, k.second);
                             });
  return it != slots.end() && it->node == node && it->type == t
             ? static_cast<int>(it - slots.begin())
             : -1;
}

namespace {

void BuildSlots(const ClusterState& cluster, ClusterModel* m) {
  for (const NodeGpus& n : cluster.nodes) m->types.push_back(n.gpuType);
  std::sort(m->types.begin(), m->types.end());
  m->types.erase(std::unique(m->types.begin(), m->types.end()), m->types.end());
  // Merge duplicate (node, type) entries before computing capacities.
  std::map<std::pair<std::string, int>, std::array<long, 3>> merged;
  for (const NodeGpus& n : cluster.nodes) {
    auto& v = merged[{n.node, m->TypeIndex(n.gpuType)}];
    v[0] += std::max(0, n.total);
    v[1] += std::max(0, n.inferenceHeld);
    v[2] += std::max(0, n.inferencePending);
  }
  for (const auto& [k, v] : merged) {
    Slot s;
    s.node = k.first;
    s.type = k.second;
    s.capacity = static_cast<int>(std::max(0L, v[0] - v[1] - v[2]));
    s.heldByInference = static_cast<int>(std::min(v[0], v[1]));
    m->slots.push_back(s);
  }
  m->used.assign(m->slots.size(), 0);
}

// Drops workers of the slowest type (homogeneous: every type but the one the
// job mostly runs on) until the job fits its limits.
void TrimJob(const ClusterModel& m, JobModel* j, bool homogeneous) {
  auto drop_type = [&](int t, int n) {
    // Fewest workers first, so the job stays on as few nodes as it can.
    while (n > 0) {
      int pick = -1;
      for (const auto& [slot, w] : j->slotWorkers) {
        if (m.slots[slot].type != t || w == 0) continue;
        if (pick < 0 || w <= j->slotWorkers.at(pick)) pick = slot;
      }
      if (pick < 0) return;
      const int take = std::min(n, j->slotWorkers[pick]);
      j->slotWorkers[pick] -= take;
      j->counts[t] -= take;
      n -= take;
      if (j->slotWorkers[pick] == 0) j->slotWorkers.erase(pick);
    }
  };
  if (homogeneous) {
    int keep = -1;
    for (size_t t = 0; t < j->counts.size(); ++t) {
      if (j->counts[t] == 0) continue;
      if (keep < 0 ||
          std::tie(j->counts[t], j->speed[t]) > std::tie(j->counts[keep], j->speed[keep])) {
        keep = static_cast<int>(t);
      }
    }
    for (size_t t = 0; t < j->counts.size(); ++t) {
      if (static_cast<int>(t) != keep) drop_type(static_cast<int>(t), j->counts[t]);
    }
    j->lockedType = keep;
  }
  while (j->Workers() > j->maxWorkers) {
    int slowest = -1;
    for (size_t t = 0; t < j->counts.size(); ++t) {
      if (j->counts[t] > 0 && (slowest < 0 || j->speed[t] < j->speed[slowest])) {
        slowest = static_cast<int>(t);
      }
    }
    drop_type(slowest, 1);
  }
}

}  // namespace

ClusterModel BuildModel(const ClusterState& cluster, const SchedulerOptions& options) {
  ClusterModel m;
  BuildSlots(cluster, &m);
  for (size_t i = 0; i < cluster.jobs.size(); ++i) {
    const JobDemand& d = cluster.jobs[i];
    JobModel j;
    j.demand = &d;
    j.input = static_cast<int>(i);
    j.ests = std::max(1, d.ests);
    j.minWorkers = std::max(1, d.minWorkers);
    // min > max (or > ests) leaves the job unplaceable; it then gets nothing.
    j.maxWorkers = std::min(std::max(d.maxWorkers, 0), j.ests);
    for (const std::string& t : m.types) {
      j.speed.push_back(AllowsType(d, t) ? SpeedOf(d, t, options) : 0.0);
    }
    j.counts.assign(m.types.size(), 0);
    for (const Placement& p : d.current) {
      const int s = m.SlotIndex(p.node, p.gpuType);
      if (s < 0 || p.workers <= 0 || j.speed[m.slots[s].type] <= 0.0) continue;
      j.slotWorkers[s] += p.workers;
      j.counts[m.slots[s].type] += p.workers;
    }
    TrimJob(m, &j, options.homogeneous);
    m.jobs.push_back(std::move(j));
  }
  std::sort(m.jobs.begin(), m.jobs.end(),
            [](const JobModel& a, const JobModel& b) { return a.ServedBefore(b); });
  for (const JobModel& j : m.jobs) {
    for (const auto& [slot, w] : j.slotWorkers) m.used[slot] += w;
  }
  return m;
}

}  // namespace easyscale::op::internal
