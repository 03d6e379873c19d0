// File: operator/src/controller/worker_pod.h
//
// The Pod of one training worker: owned by its EasyScaleJob (controller
// reference, so the garbage collector removes it with the job), labelled with
// the job, generation and role, one easyscale.io/gpu (none for "cpu"), pinned
// to its node and GPU type, told where the operator's control endpoint is and
// given the job's control token (from the job's Secret), running under the
// `restricted` Pod Security Standard with the job's resources, tolerations,
// node selector, pull secrets and service account, a memory-backed /dev/shm,
// the job's checkpoint claim when it has one, and the job's volumes
// (spec.worker.volumes: the user's model, data and output claims).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "controller/job_status.h"
#include "easyscale/common/job_spec.h"

namespace easyscale::op {

inline constexpr int kWorkerStatePort = 29400;  // where a worker serves the job's state
inline constexpr int kWorkerUid = 65532;        // the image's non-root user

struct WorkerPodOptions {
  std::string controlUrl;  // EASYSCALE_CONTROL_URL
  std::string command = "easyscale-worker";
  // Time to finish the step in flight and hand the state over after SIGTERM.
  int terminationGracePeriodSeconds = 40;
};

// "<job>-w-<generation>-<index>"
std::string WorkerPodName(const std::string& job, int64_t generation, int index);

// Where durable checkpoints go: "<mountPath>/<job UID>"; "" without a claim.
std::string DurableCheckpointDir(const JobSpec& spec, const std::string& uid);

nlohmann::json BuildWorkerPod(const nlohmann::json& job, const JobSpec& spec,
                              const WorkerRecord& worker, int64_t generation,
                              const WorkerPodOptions& options);

// The job's control-token Secret and the NetworkPolicy that lets its worker
// pods take traffic only from each other; both owned by the job.
nlohmann::json BuildControlSecret(const nlohmann::json& job, const std::string& token);
nlohmann::json BuildWorkerNetworkPolicy(const nlohmann::json& job);
// The job's certificate history ConfigMap (certificate_history.h), owned by the job.
nlohmann::json BuildCertificateConfigMap(const nlohmann::json& job,
                                         const std::vector<Certificate>& history);

}  // namespace easyscale::op
