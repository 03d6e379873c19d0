// File: operator/src/controller/cluster_cache.h
//
// The controller's typed copy of its informer caches: every EasyScaleJob,
// every worker and inference Pod (other pods are left out: they hold no GPU
// the operator counts) and every Node, each parsed once when its informer
// reports it. Readers get shared pointers to immutable views, so a snapshot
// of 10,000 pods copies pointers, not JSON. Each Apply/Remove says what the
// change means: the job whose reconcile it concerns, and whether it changes
// an input of the scheduler (a job's demand or workers, a GPU held or freed,
// a node's GPUs), which is what marks the cluster dirty for the next cycle.
//   ClusterChange c = cache.ApplyPod(obj);
//   if (!c.job.empty()) queue.Add(c.job);
//   if (c.schedulingInput) cycle.MarkDirty();
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "controller/cluster_objects.h"

namespace easyscale::op {

struct ClusterChange {
  std::string job;  // the job to reconcile ("namespace/name"); empty: none
  bool schedulingInput = false;
};

class ClusterCache {
 public:
  ClusterChange ApplyJob(const nlohmann::json& job);
  ClusterChange RemoveJob(const nlohmann::json& job);
  ClusterChange ApplyPod(const nlohmann::json& pod);
  ClusterChange RemovePod(const nlohmann::json& pod);
  ClusterChange ApplyNode(const nlohmann::json& node);
  ClusterChange RemoveNode(const nlohmann::json& node);

  JobPtr Job(const std::string& key) const;
  std::vector<JobPtr> Jobs() const;
  PodPtr Pod(const std::string& key) const;
  std::vector<PodPtr> Pods() const;  // worker and inference pods
  // The worker pods the job owns (its label and its UID as controller), by name.
  std::map<std::string, PodPtr> WorkerPodsOf(const JobView& job) const;
  std::vector<NodePtr> Nodes() const;
  NodePtr Node(const std::string& name) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, JobPtr> jobs_;
  std::map<std::string, PodPtr> pods_;
  std::map<std::string, std::map<std::string, PodPtr>> workersByJob_;  // job key -> pod key ->
  std::map<std::string, NodePtr> nodes_;
};

// Is `pod` one of `job`'s worker pods (labelled with it, owned by this incarnation)?
bool IsWorkerOf(const PodView& pod, const JobView& job);

// What the scheduler reads of a job (cluster_view.cc): a change to any of it
// needs a new cycle; a step or a condition does not.
bool SameSchedulingInputs(const JobView& a, const JobView& b);

}  // namespace easyscale::op
