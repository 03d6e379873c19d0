// Step 4: turn each job's per-type worker counts into per-node placements.
// Current placements stay where they are; a job that shrinks leaves its
// smallest groups first; new workers go where the job already runs, then to
// the node with the most free GPUs of the type, so jobs span few nodes.
#include <algorithm>
#include <set>

#include "phases.h"

namespace easyscale::op::internal {
namespace {

int HeldOfType(const ClusterModel& m, const JobModel& j, int t) {
  int n = 0;
  for (const auto& [slot, w] : j.slotWorkers) {
    if (m.slots[slot].type == t) n += w;
  }
  return n;
}

void Shrink(ClusterModel* m, JobModel* j) {
  for (size_t t = 0; t < j->counts.size(); ++t) {
    int extra = HeldOfType(*m, *j, t) - j->counts[t];
    while (extra > 0) {
      int pick = -1;
      for (const auto& [slot, w] : j->slotWorkers) {
        if (m->slots[slot].type != static_cast<int>(t)) continue;
        if (pick < 0 || w <= j->slotWorkers[pick]) pick = slot;
      }
      const int take = std::min(extra, j->slotWorkers[pick]);
      j->slotWorkers[pick] -= take;
      m->used[pick] -= take;
      extra -= take;
      if (j->slotWorkers[pick] == 0) j->slotWorkers.erase(pick);
    }
  }
}

// Slots of one type ordered by (most free, slot order).
using FreeSet = std::set<std::pair<int, int>>;  // (-free, slot)

}  // namespace

void PlaceOnNodes(ClusterModel* m) {
  for (JobModel& j : m->jobs) Shrink(m, &j);
  std::vector<int> free(m->slots.size());
  std::vector<FreeSet> byType(m->types.size());
  for (size_t s = 0; s < m->slots.size(); ++s) {
    free[s] = std::max(0, m->slots[s].capacity - m->used[s]);
    if (free[s] > 0) byType[m->slots[s].type].insert({-free[s], s});
  }
  auto take = [&](JobModel* j, int slot, int want) {
    const int n = std::min(want, free[slot]);
    if (n <= 0) return 0;
    FreeSet& set = byType[m->slots[slot].type];
    set.erase({-free[slot], slot});
    free[slot] -= n;
    if (free[slot] > 0) set.insert({-free[slot], slot});
    m->used[slot] += n;
    j->slotWorkers[slot] += n;
    return n;
  };
  for (JobModel& j : m->jobs) {
    for (size_t t = 0; t < j.counts.size(); ++t) {
      int deficit = j.counts[t] - HeldOfType(*m, j, t);
      if (deficit <= 0) continue;
      std::vector<int> own;
      for (const auto& [slot, w] : j.slotWorkers) {
        if (m->slots[slot].type == static_cast<int>(t)) own.push_back(slot);
      }
      std::stable_sort(own.begin(), own.end(), [&](int a, int b) { return free[a] > free[b]; });
      for (int slot : own) deficit -= take(&j, slot, deficit);
      while (deficit > 0 && !byType[t].empty()) {
        deficit -= take(&j, byType[t].begin()->second, deficit);
      }
      // Only when capacity the plan counted on is still held (training that
      // inference waits for): the job runs with what fits.
      j.counts[t] -= deficit;
    }
  }
}

}  // namespace easyscale::op::internal
