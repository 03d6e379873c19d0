// Steps 2 and 3: decide how many workers of each GPU type every job runs.
#include <algorithm>
#include <numeric>
#include <queue>
#include <tuple>

#include "phases.h"

namespace easyscale::op::internal {

std::vector<int> FreeByType(const ClusterModel& m) {
  std::vector<int> free(m.types.size(), 0);
  for (size_t s = 0; s < m.slots.size(); ++s) {
    free[m.slots[s].type] += std::max(0, m.slots[s].capacity - m.used[s]);
  }
  return free;
}

void Release(JobModel* j, int t, int n, std::vector<int>* freeByType) {
  j->counts[t] -= n;
  (*freeByType)[t] += n;
}

void ReleaseAll(JobModel* j, std::vector<int>* freeByType) {
  for (size_t t = 0; t < j->counts.size(); ++t) Release(j, t, j->counts[t], freeByType);
}

void ShedIdleWorkers(ClusterModel* m, std::vector<int>* freeByType) {
  for (JobModel& j : m->jobs) {
    if (j.Workers() < j.minWorkers) continue;
    const double tp = j.Tp();
    // Slowest type first: its workers are the likeliest to idle.
    std::vector<int> order;
    for (size_t t = 0; t < j.counts.size(); ++t) order.push_back(static_cast<int>(t));
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return j.speed[a] < j.speed[b]; });
    bool shed = true;
    while (shed && j.Workers() > j.minWorkers) {
      shed = false;
      for (int t : order) {
        // One worker, or all of a type: every worker holds an EST, so a slow
        // type can hold the step back until its last worker goes.
        for (int n : {1, j.counts[t]}) {
          if (n <= 0 || n > j.counts[t] || j.Workers() - n < std::max(1, j.minWorkers)) continue;
          if (j.TpWith(t, -n) >= tp * (1.0 - 1e-12)) {
            Release(&j, t, n, freeByType);
            shed = true;
            break;
          }
        }
        if (shed) break;
      }
    }
  }
}

namespace {

// The types a job may take, fastest first (ties: type order).
std::vector<int> TypesBySpeed(const JobModel& j, const std::vector<int>& mask) {
  std::vector<int> order = mask;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return j.speed[a] > j.speed[b]; });
  return order;
}

int FreeIn(const std::vector<int>& mask, const std::vector<int>& freeByType) {
  int n = 0;
  for (int t : mask) n += freeByType[t];
  return n;
}

// Takes `need` free GPUs of the mask's types, fastest first: for a fixed
// worker count faster workers never lengthen the step.
bool TakeFree(JobModel* j, const std::vector<int>& mask, int need, std::vector<int>* freeByType) {
  if (FreeIn(mask, *freeByType) < need) return false;
  for (int t : TypesBySpeed(*j, mask)) {
    const int take = std::min(need, (*freeByType)[t]);
    j->counts[t] += take;
    (*freeByType)[t] -= take;
    need -= take;
  }
  if (j->lockedType < 0 && mask.size() == 1) j->lockedType = mask[0];
  return true;
}

// Frees GPUs of the mask's types from strictly lower-priority jobs, the last
// served first: first what they hold above their minimum, then whole jobs.
// All or nothing: restores every donor if `need` still cannot be met.
bool Reclaim(ClusterModel* m, size_t taker, const std::vector<int>& mask, int need,
             std::vector<int>* freeByType) {
  const int priority = m->jobs[taker].demand->priority;
  std::vector<std::pair<size_t, std::vector<int>>> saved;
  const std::vector<int> savedFree = *freeByType;
  auto save = [&](size_t d) {
    if (saved.empty() || saved.back().first != d) saved.push_back({d, m->jobs[d].counts});
  };
  auto donors = [&](auto&& visit) {
    for (size_t d = m->jobs.size(); d-- > taker + 1;) {
      if (FreeIn(mask, *freeByType) >= need) return;
      if (m->jobs[d].demand->priority < priority) visit(d);
    }
  };
  const JobModel& t = m->jobs[taker];
  donors([&](size_t d) {
    JobModel& donor = m->jobs[d];
    for (int type : TypesBySpeed(t, mask)) {
      while (donor.counts[type] > 0 && donor.Workers() > donor.minWorkers &&
             FreeIn(mask, *freeByType) < need) {
        save(d);
        Release(&donor, type, 1, freeByType);
      }
    }
  });
  donors([&](size_t d) {
    JobModel& donor = m->jobs[d];
    bool holds = false;
    for (int type : mask) holds = holds || donor.counts[type] > 0;
    if (!holds) return;
    save(d);
    ReleaseAll(&donor, freeByType);
  });
  if (FreeIn(mask, *freeByType) >= need) return true;
  for (auto& [d, counts] : saved) m->jobs[d].counts = std::move(counts);
  *freeByType = savedFree;
  return false;
}

// Type sets a waiting job may start on: all allowed types at once, or (one
// type per job) each allowed type, the best for its minimum first.
std::vector<std::vector<int>> StartOptions(const JobModel& j, bool homogeneous) {
  std::vector<int> allowed;
  for (size_t t = 0; t < j.speed.size(); ++t) {
    if (j.speed[t] > 0.0) allowed.push_back(static_cast<int>(t));
  }
  if (!homogeneous) return {allowed};
  if (j.lockedType >= 0) return {{j.lockedType}};
  std::vector<std::vector<int>> out;
  for (int t : TypesBySpeed(j, allowed)) out.push_back({t});
  return out;
}

}  // namespace

// The job's best next step: per type, from the fewest extra workers that raise
// its throughput (with many ESTs per worker, one more worker often changes
// nothing; a slow type can even lower it) up to doubling, within the waste
// bound, scored by relative gain per GPU: gains in samples/s of different models do not compare
// (a small model's step always looks best), relative ones do, and their sum is
// the change of the sum of log-throughputs, a proportionally fair objective.
bool BestStep(const JobModel& j, int index, const SchedulerOptions& options,
              const std::vector<int>& freeByType, int onlyType, Step* out) {
  const double tp = j.Tp();
  const double better = tp * (1.0 + 1e-12) + 1e-12;
  const int room = j.maxWorkers - j.Workers();
  bool found = false;
  // Every worker holds an EST, so slow workers can cap the step: adding fast
  // ones pays only once the slow type goes, hence steps that also drop one.
  auto plan = [&](int t, int k, int drop) {
    std::vector<int> c = j.counts;
    c[t] += k;
    if (drop >= 0) c[drop] = 0;
    return c;
  };
  auto throughput = [&](int t, int k, int drop) {
    return Throughput(j.ests, plan(t, k, drop), j.speed);
  };
  for (size_t ti = 0; ti < j.speed.size(); ++ti) {
    const int t = static_cast<int>(ti);
    if (j.speed[t] <= 0.0) continue;
    if (options.homogeneous && j.lockedType >= 0 && t != j.lockedType) continue;
    if (onlyType >= 0 && t != onlyType) continue;
    std::vector<int> drops = {-1};
    for (size_t u = 0; u < j.counts.size() && onlyType < 0; ++u) {
      if (j.counts[u] > 0 && j.speed[u] < j.speed[t]) drops.push_back(static_cast<int>(u));
    }
    for (int drop : drops) {
      const int dropped = drop >= 0 ? j.counts[drop] : 0;
      const int most = std::min(room + dropped, freeByType[t]);
      if (most <= 0 || throughput(t, most, drop) <= better) continue;
      // Past one worker of this type, throughput only grows with more of them.
      int lo = 1, hi = most;
      while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (throughput(t, mid, drop) > better) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      // The best gain per GPU from the fewest raising workers up to doubling
      // the job (a step of two can beat two steps of one: 2 -> 4 workers for
      // 8 ESTs), within the waste bound, which is not monotone in the count.
      const int last = std::min(most, std::max(lo, j.Workers()));
      for (int k = lo; k <= last; ++k) {
        const std::vector<int> c = plan(t, k, drop);
        const double after = Throughput(j.ests, c, j.speed);
        if (after <= better ||
            UseInStep(j.ests, c, j.speed).IdleFraction(c) > options.maxIdleFraction) {
          continue;
        }
        // A step that frees as many GPUs as it takes counts as one GPU.
        const double gain = (after - tp) / (tp > 0.0 ? tp : after) / std::max(1, k - dropped);
        // Ties: fewer GPUs, then the faster type.
        if (!found || gain > out->gainPerGpu * (1.0 + 1e-12) ||
            (gain >= out->gainPerGpu * (1.0 - 1e-12) &&
             std::make_pair(-k, j.speed[t]) > std::make_pair(-out->gpus, j.speed[out->type]))) {
          *out = Step{gain, index, t, k, 0, drop, dropped};
          found = true;
        }
      }
    }
  }
  return found;
}

void SecureMinimums(ClusterModel* m, const SchedulerOptions& options,
                    std::vector<int>* freeByType) {
  // Jobs below their minimum (or never placeable) give everything back first,
  // so the pool is complete before anyone is served; each then starts afresh.
  for (JobModel& j : m->jobs) {
    if (j.Workers() < j.minWorkers || j.minWorkers > j.maxWorkers) ReleaseAll(&j, freeByType);
  }
  for (size_t i = 0; i < m->jobs.size(); ++i) {
    JobModel& j = m->jobs[i];
    if (j.Workers() > 0 || j.minWorkers > j.maxWorkers) continue;
    j.lockedType = -1;
    for (const std::vector<int>& mask : StartOptions(j, options.homogeneous)) {
      if (mask.empty()) continue;
      if (FreeIn(mask, *freeByType) < j.minWorkers &&
          !(options.reclaimForPriority && Reclaim(m, i, mask, j.minWorkers, freeByType))) {
        continue;
      }
      // A job that cannot reach its minimum waits with nothing.
      if (TakeFree(&j, mask, j.minWorkers, freeByType)) break;
    }
  }
}

namespace {

// Max-heap order: the largest gain per GPU, then the earlier-served job.
struct StepLess {
  bool operator()(const Step& a, const Step& b) const {
    return std::make_tuple(a.gainPerGpu, -a.job, -a.type) <
           std::make_tuple(b.gainPerGpu, -b.job, -b.type);
  }
};

void Greedy(ClusterModel* m, const SchedulerOptions& options, const std::vector<bool>& frozen,
            std::vector<int>* freeByType) {
  std::vector<unsigned> version(m->jobs.size(), 0);
  std::priority_queue<Step, std::vector<Step>, StepLess> heap;
  auto offer = [&](int j) {
    Step s;
    if (BestStep(m->jobs[j], j, options, *freeByType, -1, &s)) {
      s.version = version[j];
      heap.push(s);
    }
  };
  auto offerAll = [&] {
    for (size_t j = 0; j < m->jobs.size(); ++j) {
      const JobModel& job = m->jobs[j];
      if (!frozen[j] && job.Workers() >= job.minWorkers && job.Workers() > 0) {
        ++version[j];
        offer(j);
      }
    }
  };
  offerAll();
  while (!heap.empty()) {
    const Step s = heap.top();
    heap.pop();
    if (s.version != version[s.job]) continue;
    ++version[s.job];
    JobModel& job = m->jobs[s.job];
    if ((*freeByType)[s.type] >= s.gpus &&
        (s.dropType < 0 || job.counts[s.dropType] == s.dropped)) {
      job.counts[s.type] += s.gpus;
      (*freeByType)[s.type] -= s.gpus;
      if (s.dropType >= 0) {
        Release(&job, s.dropType, s.dropped, freeByType);
        offerAll();  // the pool grew: any job may have a step again
        continue;
      }
    }
    // Taken or not, the job's best step is recomputed against the pool now.
    offer(s.job);
  }
}

}  // namespace

void GrowForThroughput(ClusterModel* m, const SchedulerOptions& options,
                       const std::vector<double>& nowTp, std::vector<int>* freeByType) {
  std::vector<std::vector<int>> start;
  for (const JobModel& j : m->jobs) start.push_back(j.counts);
  std::vector<bool> frozen(m->jobs.size(), false);
  // Each round freezes at least one job, so this ends; usually after one or two.
  for (;;) {
    Greedy(m, options, frozen, freeByType);
    bool undone = false;
    for (size_t i = 0; i < m->jobs.size(); ++i) {
      JobModel& j = m->jobs[i];
      if (frozen[i] || nowTp[i] <= 0.0 || j.counts == start[i]) continue;
      if (j.Tp() > nowTp[i] * (1.0 + options.minGain)) continue;
      // Not worth a reconfiguration: back to the plan before growth.
      for (size_t t = 0; t < j.counts.size(); ++t) {
        Release(&j, t, j.counts[t] - start[i][t], freeByType);
      }
      frozen[i] = true;
      undone = true;
    }
    if (!undone) return;
  }
}

}  // namespace easyscale::op::internal
