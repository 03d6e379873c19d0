// Step 3b: the greedy gives GPUs in the order of their relative gain, so a job
// that started on a GPU another job values far more keeps it. A bounded pass
// of transfers repairs the common case: a receiver a few GPUs of type `a` short
// of a step that pays off takes them from the donors that lose least, and a
// donor may fill its gap with a free GPU of another type.
#include <algorithm>

#include "phases.h"

namespace easyscale::op::internal {
namespace {

struct Donation {
  int job = -1;
  int replacement = -1;  // type taken from the pool instead, or -1
  double loss = 0.0;     // relative to the donor's throughput
};

// The cheapest way for job `d` to give up one worker of type `a`; job -1 if
// it cannot.
Donation Offer(const ClusterModel& m, int a, int d, const SchedulerOptions& options,
               const std::vector<int>& freeByType) {
  Donation best;
  const JobModel& j = m.jobs[d];
  if (j.counts[a] == 0) return best;
  const double tp = j.Tp();
  if (!(tp > 0.0)) return best;
  auto consider = [&](int replacement, double after) {
    const double loss = (tp - after) / tp;
    if (best.job < 0 || loss < best.loss) best = Donation{d, replacement, loss};
  };
  if (j.Workers() - 1 >= j.minWorkers) consider(-1, j.TpWith(a, -1));
  if (options.homogeneous) return best;
  for (size_t b = 0; b < j.counts.size(); ++b) {
    if (static_cast<int>(b) == a || j.speed[b] <= 0.0 || freeByType[b] == 0) continue;
    std::vector<int> c = j.counts;
    --c[a];
    ++c[b];
    const StepUse use = UseInStep(j.ests, c, j.speed);
    if (use.IdleFraction(c) > options.maxIdleFraction) continue;
    consider(static_cast<int>(b), Throughput(j.ests, c, j.speed));
  }
  return best;
}

}  // namespace

void ImproveByTransfers(ClusterModel* m, const SchedulerOptions& options,
                        std::vector<int>* freeByType) {
  const int types = static_cast<int>(m->types.size());
  // Each transfer raises the total throughput; the bounds keep the pass cheap.
  constexpr int kMostShort = 8;
  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    bool moved = false;
    for (int a = 0; a < types; ++a) {
      std::vector<int> more = *freeByType;
      more[a] += kMostShort;
      Step best;
      bool found = false;
      for (size_t r = 0; r < m->jobs.size(); ++r) {
        const JobModel& j = m->jobs[r];
        if (j.Workers() == 0 || j.Workers() < j.minWorkers) continue;
        // Room for no more than the pool holds: the greedy already took any
        // step the pool allows.
        if (j.maxWorkers - j.Workers() <= (*freeByType)[a] || j.speed[a] <= 0.0) continue;
        Step s;
        if (!BestStep(j, r, options, more, a, &s) || s.gpus <= (*freeByType)[a]) {
          continue;
        }
        if (!found || s.gainPerGpu * s.gpus > best.gainPerGpu * best.gpus) {
          best = s;
          found = true;
        }
      }
      if (!found) continue;
      // Take the missing GPUs one by one from the cheapest donors; undo all
      // unless the receiver gains more than the donors lose.
      const std::vector<int> savedFree = *freeByType;
      std::vector<std::pair<int, std::vector<int>>> saved;
      double loss = 0.0;
      std::vector<Donation> offers(m->jobs.size());
      for (size_t d = 0; d < m->jobs.size(); ++d) {
        if (static_cast<int>(d) != best.job) offers[d] = Offer(*m, a, d, options, *freeByType);
      }
      while ((*freeByType)[a] < best.gpus) {
        Donation d;
        for (const Donation& o : offers) {
          if (o.job >= 0 && (d.job < 0 || o.loss < d.loss)) d = o;
        }
        if (d.job < 0) break;
        if (d.replacement >= 0 && (*freeByType)[d.replacement] == 0) {
          offers[d.job] = Offer(*m, a, d.job, options, *freeByType);
          continue;
        }
        JobModel& donor = m->jobs[d.job];
        saved.push_back({d.job, donor.counts});
        Release(&donor, a, 1, freeByType);
        if (d.replacement >= 0) Release(&donor, d.replacement, -1, freeByType);
        loss += d.loss;
        // Only this donor's offer changed; others whose replacement type ran
        // out are re-made when picked.
        offers[d.job] = Offer(*m, a, d.job, options, *freeByType);
      }
      JobModel& receiver = m->jobs[best.job];
      // Relative gain against the donors' relative losses, like the greedy.
      const double gain = best.gainPerGpu * best.gpus;
      if ((*freeByType)[a] >= best.gpus && gain > loss + std::max(1e-9, options.minGain)) {
        Release(&receiver, a, -best.gpus, freeByType);
        moved = true;
      } else {
        for (auto it = saved.rbegin(); it != saved.rend(); ++it)
          m->jobs[it->first].counts = it->second;
        *freeByType = savedFree;
      }
    }
    if (!moved) return;
  }
}

}  // namespace easyscale::op::internal
