// Answers assignments and keeps reports and rendezvous keys of published plans.
#include "controller/control_book.h"

#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"

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
  a.rendezvous.url = p.rendezvousUrl;
  a.rendezvous.prefix = p.rendezvousPrefix;
  if (p.restore.generation == generation) a.restore = p.restore.plan;
  a.checkpointDir = p.checkpointDir;
  a.backend = p.backend != "auto" ? p.backend : (w.gpuType == "cpu" ? "cpu" : "cuda");
  a.training = p.training;
  a.output = p.output;
  a.certificateEvery = p.certificateEvery;
  return a;
}

// Whether the job asked for certificate `c`, and it agrees with the newest taken.
Status CheckCertificate(const ControlPlan& p, const Certificate& c, const Certificate& newest) {
  const std::string field = absl::StrCat("certificate.step: ", c.step, ": ");
  if (p.certificateEvery <= 0) {
    return absl::InvalidArgumentError(field + "job " + p.job +
                                      " asked for no certificates (spec.certificate.everySteps)");
  }
  if (c.step % p.certificateEvery != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, "not a multiple of spec.certificate.everySteps (", p.certificateEvery, ")"));
  }
  if (c.step > p.training.steps) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "past the job's last step (", p.training.steps, ")"));
  }
  if (c.step == newest.step && c.digest != newest.digest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "certificate.digest: step ", c.step, " was certified with digest ", newest.digest,
        ", this report says ", c.digest, ": the job's training is not deterministic"));
  }
  return absl::OkStatus();
}

const DrainingRecord* FindRecord(const std::vector<DrainingRecord>& records,
                                 const std::string& pod) {
  for (const DrainingRecord& d : records) {
    if (d.worker.pod == pod) return &d;
  }
  return nullptr;
}

bool IsMember(const ControlPlan& p, const std::string& pod) {
  for (const WorkerRecord& w : p.workers) {
    if (w.pod == pod) return true;
  }
  return FindRecord(p.draining, pod) != nullptr || FindRecord(p.keep, pod) != nullptr;
}

}  // namespace

bool DrainedBy(const DrainingRecord& d, const std::optional<WorkerReport>& newest) {
  if (!newest.has_value()) return false;
  if (newest->generation > d.generation) return true;  // it already runs a later generation
  return newest->generation == d.generation &&
         (newest->state == WorkerState::kCheckpointed || newest->state == WorkerState::kSucceeded ||
          newest->state == WorkerState::kFailed);
}

void ControlBook::Publish(ControlPlan plan) {
  std::lock_guard<std::mutex> lock(mu_);
  Job& j = jobs_[plan.job];
  j.store->SetPrefix(plan.rendezvousPrefix);
  // Reports of pods that left the plan are not needed any more.
  std::erase_if(j.reports, [&](const auto& entry) { return !IsMember(plan, entry.first); });
  j.plan = std::move(plan);
}

void ControlBook::Forget(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.erase(job);
}

StatusOr<ControlBook::Job*> ControlBook::FindLocked(const std::string& job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return absl::UnavailableError("no plan for job " + job + " yet");
  return &it->second;
}

Status ControlBook::Authenticate(const std::string& job, const std::string& authorization) {
  std::lock_guard<std::mutex> lock(mu_);
  ES_ASSIGN_OR_RETURN(Job * j, FindLocked(job));
  if (!AuthorizedBy(authorization, j->plan.token)) {
    return absl::UnauthenticatedError("not the control token of job " + job);
  }
  return absl::OkStatus();
}

StatusOr<WorkerAssignment> ControlBook::AssignmentFor(const std::string& job,
                                                      const std::string& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  ES_ASSIGN_OR_RETURN(Job * j, FindLocked(job));
  const ControlPlan& p = j->plan;
  for (const WorkerRecord& w : p.workers) {
    if (w.pod != pod) continue;
    WorkerAssignment a = Base(p, w, p.generation, static_cast<int>(p.workers.size()));
    a.action = p.runningGeneration == p.generation ? WorkerAction::kRun : WorkerAction::kWait;
    return a;
  }
  const DrainingRecord* d = FindRecord(p.draining, pod);
  if (d == nullptr) d = FindRecord(p.keep, pod);
  if (d != nullptr) {
    WorkerAssignment a = Base(p, d->worker, d->generation, d->worldSize);
    a.action = WorkerAction::kCheckpointAndStop;
    return a;
  }
  return absl::NotFoundError("pod " + pod + " is in no generation of " + job);
}

StatusOr<bool> ControlBook::Record(const WorkerReport& r) {
  std::lock_guard<std::mutex> lock(mu_);
  ES_ASSIGN_OR_RETURN(Job * j, FindLocked(r.job));
  if (!IsMember(j->plan, r.pod)) {
    return absl::PermissionDeniedError("pod \"" + r.pod.substr(0, 253) + "\" is not a worker of " +
                                       r.job + "'s plan");
  }
  auto it = j->reports.find(r.pod);
  if (it != j->reports.end() && r.generation < it->second.generation) return false;  // stale
  bool news = it == j->reports.end() || it->second.state != r.state ||
              it->second.generation != r.generation;
  const Certificate& c = r.certificate;
  if (c.step > 0) {
    ES_RETURN_IF_ERROR(CheckCertificate(j->plan, c, j->newestCertificate));
    if (c.step > j->newestCertificate.step) {
      j->newestCertificate = c;
      std::vector<Certificate>& pending = j->pendingCertificates;
      pending.push_back(c);
      if (pending.size() > kMaxPendingCertificates) pending.erase(pending.begin());
      news = true;
    }
  }
  j->reports[r.pod] = r;
  return news;
}

std::vector<Certificate> ControlBook::PendingCertificates(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? std::vector<Certificate>() : it->second.pendingCertificates;
}

void ControlBook::Stored(const std::string& job, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  std::erase_if(it->second.pendingCertificates,
                [step](const Certificate& c) { return c.step <= step; });
}

std::map<std::string, WorkerReport> ControlBook::Reports(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? std::map<std::string, WorkerReport>() : it->second.reports;
}

StatusOr<std::shared_ptr<RendezvousStore>> ControlBook::Store(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  ES_ASSIGN_OR_RETURN(Job * j, FindLocked(job));
  return j->store;
}

}  // namespace easyscale::op
