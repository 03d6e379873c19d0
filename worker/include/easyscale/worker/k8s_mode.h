// File: easyscale/worker/k8s_mode.h
//
// `easyscale-worker k8s`: a worker Pod that follows the operator through the
// control protocol (common/control_protocol.h). It polls its assignment, runs
// each generation it is a member of (restoring the job's state from its own
// memory, from the workers the operator names, from the durable checkpoint, or
// fresh; meeting its peers through the operator's rendezvous store), votes to
// stop at the next step boundary when a newer generation appears or SIGTERM
// arrives, and reports progress, restoration, failures and the final digest.
// Between generations it holds the whole job's state and serves it to new
// workers; a generation cut short by a lost peer leaves it holding the last
// completed step. It exits when the job succeeded, on SIGTERM, when no
// generation names it for a while, or on an error retrying cannot help.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "easyscale/common/control_protocol.h"
#include "easyscale/common/status.h"

namespace easyscale {

struct K8sWorkerOptions {
  std::string control_url;  // http://host:port of the operator's control server
  std::string job;          // namespace/name
  std::string pod;
  std::string token;  // the job's control token
  std::string pod_ip = "127.0.0.1";
  int state_port = 29400;   // 0: any free port (tests with several workers on one address)
  std::string digits_file;  // the embedded digits (--dataset mnist without --data)
  // How long to wait for an assignment naming this pod before exiting.
  std::chrono::milliseconds unassigned_grace{60000};
  std::chrono::milliseconds poll_interval{100};
  // A peer silent this long (rendezvous, collectives, state transfer) is gone.
  std::chrono::milliseconds peer_timeout{60000};
};

Status RunK8sWorker(const K8sWorkerOptions& options);

// The control server's client: GET assignment, POST report, with the job's token.
class ControlClient {
 public:
  ControlClient(const std::string& url, const std::string& token);
  ~ControlClient();
  // NotFound when the pod is in no generation.
  StatusOr<WorkerAssignment> GetAssignment(const std::string& job, const std::string& pod);
  Status Report(const WorkerReport& report);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace easyscale
