// File: operator/src/controller/control_book.h
//
// What the worker control endpoint knows, per job: the plan reconcile last
// wrote to the job's status (generation, members, draining workers of the
// running generation, where the released generation restores from, which
// workers stay only to hand the state over), the job's control token, the
// rendezvous store of its newest generation, and the newest report of every
// worker pod of the plan. Reconcile publishes plans; the control server
// authenticates callers, answers assignments, records reports and serves the
// store.
//   GET assignment for pod P of job J:
//     P in plan.workers      -> the newest generation; Run once reconcile has
//                               released it (runningGeneration == generation),
//                               else Wait
//     P draining, or kept to
//     hand the state over    -> its own generation, CheckpointAndStop
//     otherwise              -> NotFound (the worker exits)
// State is kept for the pods of a published plan only: reports from other
// pods, other jobs or without the job's token leave nothing behind.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "controller/job_status.h"
#include "easyscale/common/control_protocol.h"
#include "easyscale/common/rendezvous_store.h"

namespace easyscale::op {

struct ControlPlan {
  std::string job;    // namespace/name
  std::string token;  // the job's control token (control_token.h)
  int64_t generation = 0;
  int64_t runningGeneration = 0;
  int totalEsts = 1;
  std::vector<WorkerRecord> workers;
  std::vector<DrainingRecord> draining;
  // Workers of an earlier generation that serve the state to the new one.
  std::vector<DrainingRecord> keep;
  RestoreRecord restore;
  std::string rendezvousUrl;     // the control endpoint as workers reach it
  std::string rendezvousPrefix;  // unique per generation and operator process
  std::string checkpointDir;     // durable checkpoints; empty without a claim
  std::string backend = "auto";  // auto: cpu for gpuType "cpu", else cuda
  TrainingArgs training;
  OutputSpec output;             // where rank 0 writes the trained model (spec.output)
  int64_t certificateEvery = 0;  // spec.certificate.everySteps
};

// Certificates the book holds per job until reconcile has stored them; the
// oldest go first beyond this (a job whose history cannot be written).
inline constexpr size_t kMaxPendingCertificates = 1000;

class ControlBook {
 public:
  void Publish(ControlPlan plan);
  void Forget(const std::string& job);

  // OK when the Authorization header `authorization` carries the job's
  // token; Unavailable while the job has no plan (a new leader before its
  // first reconcile), Unauthenticated otherwise.
  Status Authenticate(const std::string& job, const std::string& authorization);
  StatusOr<WorkerAssignment> AssignmentFor(const std::string& job, const std::string& pod);
  // Records a report of a pod of the plan; true when it says something new
  // (state, generation or a certificate). PermissionDenied for pods outside
  // the plan; InvalidArgument, with nothing kept, for a certificate the job
  // did not ask for (a step that is no multiple of certificateEvery, or past
  // the last) or one that contradicts the digest already taken for its step.
  StatusOr<bool> Record(const WorkerReport& r);
  std::map<std::string, WorkerReport> Reports(const std::string& job);
  // The certificates reported since the last Stored, in step order; each
  // step once, with steps above every certificate taken before.
  std::vector<Certificate> PendingCertificates(const std::string& job);
  // Drops the pending certificates up to `step` (reconcile stored them).
  void Stored(const std::string& job, int64_t step);

  // The job's rendezvous store (control_protocol.h /v1/store): the newest
  // generation's keys.
  StatusOr<std::shared_ptr<RendezvousStore>> Store(const std::string& job);

 private:
  struct Job {
    ControlPlan plan;
    std::map<std::string, WorkerReport> reports;  // pod -> newest
    Certificate newestCertificate;                // the highest step taken
    std::vector<Certificate> pendingCertificates;
    std::shared_ptr<RendezvousStore> store = std::make_shared<RendezvousStore>();
  };
  StatusOr<Job*> FindLocked(const std::string& job);  // mu_ held

  std::mutex mu_;
  std::map<std::string, Job> jobs_;
};

// Has the draining worker stopped the generation it was running (checkpointed,
// finished, or failed holding its state)?
bool DrainedBy(const DrainingRecord& d, const std::optional<WorkerReport>& newest);

}  // namespace easyscale::op
