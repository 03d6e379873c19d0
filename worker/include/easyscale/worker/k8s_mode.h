// File: easyscale/worker/k8s_mode.h
//
// `easyscale-worker k8s`: a worker Pod that follows the operator through the
// control protocol (common/control_protocol.h). It polls its assignment, runs
// each generation it is a member of, votes to stop at the next step boundary
// when a newer generation appears or SIGTERM arrives, and reports progress,
// restoration (the ack) and the final digest.
#pragma once

#include <chrono>
#include <string>

#include "easyscale/common/control_protocol.h"
#include "easyscale/common/status.h"

namespace easyscale {

struct K8sWorkerOptions {
  std::string control_url;  // http://host:port of the operator's control server
  std::string job;          // namespace/name
  std::string pod;
  std::string pod_ip = "127.0.0.1";
  std::string data_path;
  // How long to wait for an assignment naming this pod before exiting.
  std::chrono::milliseconds unassigned_grace{60000};
  std::chrono::milliseconds poll_interval{100};
};

// Returns when the job succeeded, when this pod left the job, or on SIGTERM
// after the hand-over checkpoint.
Status RunK8sWorker(const K8sWorkerOptions& options);

// The control server's client: GET assignment, POST report.
class ControlClient {
 public:
  explicit ControlClient(const std::string& url);
  ~ControlClient();
  // NotFound when the pod is in no generation.
  StatusOr<WorkerAssignment> GetAssignment(const std::string& job, const std::string& pod);
  Status Report(const WorkerReport& report);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace easyscale
