// File: easyscale/common/job_spec.h
//
// The EasyScaleJob spec (easyscale.io/v1alpha1) and the training arguments the
// worker runs with. One definition serves the CRD's reader (operator), the
// worker's CLI and the control protocol. Field names are the CRD's camelCase.
//
//   StatusOr<JobSpec> spec = ParseJobSpec(obj["spec"]);   // names the bad field
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "easyscale/common/job_volumes.h"
#include "easyscale/common/status.h"

namespace easyscale {

inline constexpr const char* kApiGroup = "easyscale.io";
inline constexpr const char* kApiVersion = "v1alpha1";
inline constexpr const char* kJobKind = "EasyScaleJob";
inline constexpr const char* kGpuResource = "easyscale.io/gpu";

// Accelerator types the system knows; "cpu" is a worker without a GPU.
const std::vector<std::string>& KnownGpuTypes();
bool IsKnownGpuType(const std::string& type);

// What one job trains. Everything that changes the final bits is here, and
// nothing that depends on resources (worker count, placement, device type).
struct TrainingArgs {
  std::string model = "cnn";      // mlp | cnn | file (an ONNX model, modelFile)
  std::string modelFile;          // the ONNX file when model is "file"
  std::string dataset = "mnist";  // mnist | synthetic | tokens (the embedded data sets)
  // Users' data instead of `dataset` (which then stays "mnist"): an image
  // folder, a .safetensors file, or a folder of inputs.npy and labels.npy
  // (worker/include/easyscale/worker/dataset.h). The path is no part of the
  // job's identity; the data's SHA-256 is.
  std::string data;
  // Per-channel normalisation of uint8 pixels after /255: (x - mean) / std;
  // one value for every channel or one per channel. Empty: /255 only.
  std::vector<double> normalizeMean;
  std::vector<double> normalizeStd;
  int64_t steps = 120;  // global mini-batches
  uint64_t seed = 1;
  int batchPerEst = 16;           // micro-batch of one EST
  std::string optimizer = "sgd";  // sgd | adam
  double learningRate = 0.05;
  double momentum = 0.9;
  double weightDecay = 1e-4;
  std::string lrSchedule = "cosine";  // constant | step | cosine
  int64_t warmupSteps = 0;
  bool augment = true;
  int64_t checkpointEvery = 10;  // steps between periodic checkpoints; 0 = off

  bool operator==(const TrainingArgs&) const = default;
};

// Durable checkpoints: a ReadWriteMany PersistentVolumeClaim mounted into
// every worker, checkpoints in <mountPath>/<job UID>. Without a claim the job
// has no durable checkpoint: it survives the loss of some workers (the others
// hold its state), not of all at once.
struct CheckpointVolume {
  std::string claimName;
  std::string mountPath = "/checkpoints";
  bool operator==(const CheckpointVolume&) const = default;
};

// Where the trained model goes: rank 0 writes it into `path` (absolute, a folder
// the job mounts) at the end, and with everyCheckpoint also into
// <path>/step-<N> at every durable checkpoint. Not part of the training
// identity: where the model is written changes no bit of it.
struct OutputSpec {
  std::string path;  // empty: the job writes no model files
  bool everyCheckpoint = false;
  bool operator==(const OutputSpec&) const = default;
};

// How the worker Pods run, in the Kubernetes shapes (Toleration objects,
// quantities such as "2Gi"). The operator adds the GPU, its node and the
// security context itself. `volumes` hold the user's model, data and output.
struct WorkerPodSettings {
  std::map<std::string, std::string> requests = {{"cpu", "1"}, {"memory", "2Gi"}};
  std::map<std::string, std::string> limits = {{"memory", "4Gi"}};
  nlohmann::json tolerations = nlohmann::json::array();
  std::map<std::string, std::string> nodeSelector;
  std::vector<std::string> imagePullSecrets;
  std::string serviceAccountName;
  std::string shmSize = "1Gi";  // /dev/shm (memory-backed) for the collectives
  std::vector<JobVolume> volumes;
  bool operator==(const WorkerPodSettings&) const = default;
};

// The consistency certificate (control_protocol.h): every everySteps global
// steps, rank 0 publishes the digest of the whole training state; the operator
// keeps the newest in status.certificate and the history in the job's
// ConfigMap. 0 (the default) = none. Not part of the training identity.
struct CertificateSpec {
  int64_t everySteps = 0;
  bool operator==(const CertificateSpec&) const = default;
};

// Failures: after backoffLimit worker failures the job is Failed.
struct RunPolicy {
  int backoffLimit = 6;
  bool operator==(const RunPolicy&) const = default;
};

struct JobSpec {
  std::string image;
  int ests = 0;
  int minWorkers = 1;
  int maxWorkers = 0;                 // absent in the input: ests
  std::vector<std::string> gpuTypes;  // allowed types; empty = any known type
  int priority = 0;
  TrainingArgs training;
  CheckpointVolume checkpoint;
  OutputSpec output;
  CertificateSpec certificate;
  WorkerPodSettings worker;
  RunPolicy runPolicy;
  // No worker pods while true: a running job is drained to a checkpoint and
  // its pods deleted; false again resumes it. Kueue admits jobs through it.
  bool suspend = false;
  bool operator==(const JobSpec&) const = default;
};

StatusOr<TrainingArgs> ParseTrainingArgs(const nlohmann::json& j, const std::string& path);
// Validates every field and the relations between them
// (1 <= minWorkers <= maxWorkers <= ests, known GPU types, image set,
// Kubernetes names, label keys and quantities in spec.worker, volumes that
// overlap no other mount, the model file inside one of them).
StatusOr<JobSpec> ParseJobSpec(const nlohmann::json& j, const std::string& path = "spec");
// Every rule a TrainingArgs obeys (values in range and finite, known names,
// warmupSteps < steps); parsing applies the same. Errors name the field as
// "<path>.<field>", or as `name(field)` spells it (a CLI: "--batch-per-est").
Status ValidateTrainingArgs(const TrainingArgs& t, const std::string& path);
Status ValidateTrainingArgs(const TrainingArgs& t,
                            const std::function<std::string(std::string_view field)>& name);

// Kubernetes syntax checks, as the API server applies them.
bool IsDns1123Subdomain(const std::string& s);
bool IsDns1123Label(const std::string& s);
bool IsQualifiedLabelKey(const std::string& s);
bool IsLabelValue(const std::string& s);
bool IsQuantity(const std::string& s);

// Reads spec.output (`path` absolute when set; everyCheckpoint needs a path).
StatusOr<OutputSpec> ParseOutputSpec(const nlohmann::json& j, const std::string& path);

nlohmann::json ToJson(const TrainingArgs& t);
nlohmann::json ToJson(const OutputSpec& o);
nlohmann::json ToJson(const JobSpec& s);

}  // namespace easyscale
