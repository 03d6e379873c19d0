// Next-generation planning.
#include "controller/generation_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "controller/worker_pod.h"
#include "easyscale/common/checks.h"

namespace easyscale::op {

PlacementCounts CountPlacements(const std::vector<Placement>& placements) {
  PlacementCounts c;
  for (const Placement& p : placements) {
    if (p.workers > 0) c[{p.node, p.gpuType}] += p.workers;
  }
  return c;
}

PlacementCounts CountWorkers(const std::vector<WorkerRecord>& workers) {
  PlacementCounts c;
  for (const WorkerRecord& w : workers) ++c[{w.node, w.gpuType}];
  return c;
}

std::vector<Placement> ToPlacements(const PlacementCounts& counts) {
  std::vector<Placement> out;
  for (const auto& [key, n] : counts) out.push_back({key.first, key.second, n});
  return out;
}

std::map<std::string, double> CompleteSpeeds(const std::map<std::string, double>& measured,
                                             const SchedulerOptions& options) {
  double ratio = 0;
  int n = 0;
  for (const auto& [type, v] : measured) {
    auto d = options.defaultSpeed.find(type);
    if (d != options.defaultSpeed.end() && d->second > 0 && v > 0) {
      ratio += v / d->second;
      ++n;
    }
  }
  if (n == 0) return measured;
  ratio /= n;
  std::map<std::string, double> out = measured;
  for (const auto& [type, d] : options.defaultSpeed) {
    if (out.count(type) == 0) out[type] = d * ratio;
  }
  return out;
}

JobDemand DemandOf(const std::string& key, const JobSpec& spec, const JobStatus& st,
                   const SchedulerOptions& options) {
  JobDemand d;
  d.key = key;
  d.ests = spec.ests;
  d.minWorkers = spec.minWorkers;
  d.maxWorkers = spec.maxWorkers;
  d.priority = spec.priority;
  d.gpuTypes = spec.gpuTypes;
  d.speed = CompleteSpeeds(st.speed, options);
  d.current = ToPlacements(CountWorkers(st.workers));
  return d;
}

StatusOr<PlanChange> PlanNextGeneration(const std::string& jobName, const JobSpec& spec,
                                        const std::vector<Placement>& desired, int preempted,
                                        bool restart, const std::string& now,
                                        const SchedulerOptions& options, JobStatus* st,
                                        const std::set<std::string>& leaving) {
  PlanChange change;
  const PlacementCounts want = CountPlacements(desired);
  const bool anyLeaves =
      std::any_of(st->workers.begin(), st->workers.end(),
                  [&](const WorkerRecord& w) { return leaving.count(w.pod) > 0; });
  if (want == CountWorkers(st->workers) && !restart && !anyLeaves) return change;
  const int64_t next = st->generation + 1;

  // Keep the lowest-ranked workers on each (node, type) but those leaving,
  // then add new pods.
  PlacementCounts room = want;
  std::vector<WorkerRecord> workers;
  for (const WorkerRecord& w : st->workers) {
    int& left = room[{w.node, w.gpuType}];
    if (left > 0 && leaving.count(w.pod) == 0) {
      --left;
      workers.push_back(w);
    }
  }
  int index = 0;
  for (const auto& [key, n] : room) {
    for (int i = 0; i < n; ++i) {
      workers.push_back({WorkerPodName(jobName, next, index++), key.first, key.second, 0, {}});
    }
  }
  if (!workers.empty()) {
    std::vector<std::string> types;
    for (const WorkerRecord& w : workers) types.push_back(w.gpuType);
    ES_ASSIGN_OR_RETURN(EstAssignment a,
                        AssignEsts(spec.ests, types, CompleteSpeeds(st->speed, options), options));
    ES_CHECK(a.worldSize() == static_cast<int>(workers.size()))
        << "AssignEsts changed the world size";
    for (size_t r = 0; r < workers.size(); ++r) {
      workers[r].rank = static_cast<int>(r);
      workers[r].ests = a.workers[r];
    }
  }

  // Every worker of the running generation checkpoints before `next` runs. If
  // the newest generation never ran, the ones still draining stay as they are.
  if (st->runningGeneration > 0 && st->runningGeneration == st->generation) {
    st->draining.clear();
    for (const WorkerRecord& w : st->workers) {
      st->draining.push_back({w, st->generation, static_cast<int>(st->workers.size()), now});
    }
  }

  change.changed = true;
  change.oldWorkers = static_cast<int>(st->workers.size());
  change.newWorkers = static_cast<int>(workers.size());
  std::string where;
  for (const auto& [key, n] : want) {
    absl::StrAppend(&where, where.empty() ? "" : ", ", n, "x ", key.second, " on ", key.first);
  }
  if (where.empty()) where = "no GPUs";
  if (change.oldWorkers == 0) {
    change.reason = st->startTime.empty() ? "Scheduled" : "Restored";
    if (st->startTime.empty()) st->startTime = now;
  } else if (restart) {
    change.reason = "Restarted";
  } else if (preempted > 0) {
    change.reason = "Preempted";
    st->preemptions += preempted;
    st->everPreempted = true;
  } else if (change.newWorkers > change.oldWorkers) {
    change.reason = "ScaledOut";
  } else if (change.newWorkers < change.oldWorkers) {
    change.reason = "ScaledIn";
  } else {
    change.reason = "Rescheduled";
  }
  change.message = absl::StrCat(change.reason == "Preempted"
                                    ? absl::StrCat("inference needs ", preempted, " GPU(s) back; ")
                                    : "",
                                "generation ", next, ": ", change.oldWorkers, " -> ",
                                change.newWorkers, " workers (", where, ")");
  ++st->scaleEvents;
  st->generation = next;
  st->workers = std::move(workers);
  return change;
}

bool ReadyToRelease(const JobStatus& st, WallClock::time_point now) {
  if (st.runningGeneration >= st.generation || !st.draining.empty() || st.workers.empty()) {
    return false;
  }
  if (st.restartAfter.empty()) return true;
  StatusOr<WallClock::time_point> after = ParseTime(st.restartAfter);
  return !after.ok() || now >= *after;
}

std::chrono::milliseconds RestartBackoff(int restarts, std::chrono::milliseconds cap) {
  if (restarts <= 1) return std::chrono::milliseconds(0);
  const int doublings = std::min(restarts - 2, 20);
  return std::min(cap, std::chrono::milliseconds(1000) * (int64_t{1} << doublings));
}

JobPhase PhaseOf(const JobStatus& st) {
  if (st.workers.empty()) return st.everPreempted ? JobPhase::kPreempted : JobPhase::kPending;
  return st.runningGeneration == st.generation ? JobPhase::kRunning : JobPhase::kScaling;
}

}  // namespace easyscale::op
