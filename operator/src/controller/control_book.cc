// Answers assignments from published plans.
#include "controller/control_book.h"

namespace easyscale::op {

namespace {

WorkerAssignment Base(const ControlPlan& p, const WorkerRecord& w, int64_t generation,
                      int worldSize) {
  WorkerAssignment a;
  a.job = p.job;
  a.generation = generation;
  a.rank = w.rank;
  a.worldSize = worldSize;
  a.totalEsts = p.totalEsts;
  a.ests = w.ests;
  a.rendezvous.store = "file";
  a.rendezvous.path = p.checkpointDir + "/rendezvous";
  a.rendezvous.prefix = "gen-" + std::to_string(generation);
  a.checkpointDir = p.checkpointDir;
  a.backend = p.backend != "auto" ? p.backend : (w.gpuType == "cpu" ? "cpu" : "cuda");
  a.training = p.training;
  return a;
}

}  // namespace

bool DrainedBy(const DrainingRecord& d, const std::optional<WorkerReport>& newest) {
  if (!newest.has_value()) return false;
  if (newest->generation > d.generation) return true;  // it already runs a later generation
  return newest->generation == d.generation &&
         (newest->state == WorkerState::kCheckpointed || newest->state == WorkerState::kSucceeded);
}

void ControlBook::Publish(ControlPlan plan) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string job = plan.job;
  plans_[job] = std::move(plan);
}

void ControlBook::Forget(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  plans_.erase(job);
  reports_.erase(job);
}

bool ControlBook::HasPlan(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.count(job) != 0;
}

StatusOr<WorkerAssignment> ControlBook::AssignmentFor(const std::string& job,
                                                      const std::string& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(job);
  if (it == plans_.end()) return absl::UnavailableError("no plan for job " + job + " yet");
  const ControlPlan& p = it->second;
  for (const WorkerRecord& w : p.workers) {
    if (w.pod != pod) continue;
    WorkerAssignment a = Base(p, w, p.generation, static_cast<int>(p.workers.size()));
    a.action = ReleasedLocked(p) ? WorkerAction::kRun : WorkerAction::kWait;
    return a;
  }
  for (const DrainingRecord& d : p.draining) {
    if (d.worker.pod != pod) continue;
    WorkerAssignment a = Base(p, d.worker, d.generation, d.worldSize);
    a.action = WorkerAction::kCheckpointAndStop;
    return a;
  }
  return absl::NotFoundError("pod " + pod + " is in no generation of " + job);
}

// The plan's release is decided by the reconcile that published it; the last
// Checkpointed report may have arrived since. Answering from the reports the
// book holds now keeps the endpoint from lagging the status that the next
// reconcile writes from the same reports (and DrainedBy) after them.
bool ControlBook::ReleasedLocked(const ControlPlan& p) const {
  if (p.runningGeneration == p.generation) return true;
  auto pods = reports_.find(p.job);
  for (const DrainingRecord& d : p.draining) {
    std::optional<WorkerReport> newest;
    if (pods != reports_.end()) {
      auto r = pods->second.find(d.worker.pod);
      if (r != pods->second.end()) newest = r->second;
    }
    if (!DrainedBy(d, newest)) return false;  // it may still be training: Wait
  }
  return !p.draining.empty();  // no record: only reconcile's ReleaseIfDrained releases
}

bool ControlBook::Record(const WorkerReport& r) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& pods = reports_[r.job];
  auto it = pods.find(r.pod);
  const bool news =
      it == pods.end() || it->second.state != r.state || it->second.generation != r.generation;
  if (it != pods.end() && r.generation < it->second.generation) return false;  // stale
  pods[r.pod] = r;
  return news;
}

std::map<std::string, WorkerReport> ControlBook::Reports(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = reports_.find(job);
  return it == reports_.end() ? std::map<std::string, WorkerReport>() : it->second;
}

}  // namespace easyscale::op
