// File: operator/src/controller/worker_pod.h
//
// The Pod of one training worker: owned by its EasyScaleJob (controller
// reference, so the garbage collector removes it with the job), labelled with
// the job, generation and role, one easyscale.io/gpu, pinned to its node and
// GPU type, told where the operator's control endpoint is, and mounting the
// job's checkpoint volume.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "controller/job_status.h"
#include "easyscale/common/job_spec.h"

namespace easyscale::op {

struct WorkerPodOptions {
  std::string controlUrl;  // EASYSCALE_CONTROL_URL
  std::string command = "easyscale-worker";
};

// "<job>-w-<generation>-<index>"
std::string WorkerPodName(const std::string& job, int64_t generation, int index);

nlohmann::json BuildWorkerPod(const nlohmann::json& job, const JobSpec& spec,
                              const WorkerRecord& worker, int64_t generation,
                              const WorkerPodOptions& options);

}  // namespace easyscale::op
