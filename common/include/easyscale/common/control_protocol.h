// File: easyscale/common/control_protocol.h
//
// The versioned worker control protocol (HTTP + JSON) between the operator and
// each worker, and between workers. Every call carries the job's control token
// (`Authorization: Bearer <token>`; the operator derives one per job and hands
// it to the job's pods through a Secret): only the job's own workers are heard.
//
// Operator (control endpoint):
//   GET  /v1/assignment?job=ns/name&pod=P -> 200 WorkerAssignment of the job's
//        newest generation for pod P; 404 when P is in no generation (it exits)
//   POST /v1/report                        <- WorkerReport, answered 204; 403
//        when the pod is not in the job's plan
//   PUT  /v1/store?job=J&key=K             <- rendezvous value (bytes), 204
//   GET  /v1/store?job=J&key=K             -> 200 value | 404 not (yet) there
//        Keys live under the generation's rendezvous prefix; a store holds the
//        keys of the newest generation only.
// Worker (state endpoint, one per worker):
//   GET  /v1/state?job=J&step=S            -> 200 EncodeSnapshot (worker's
//        snapshot.h) of the whole job at step S | 404 when it holds another step
//
// Life of a generation g (the operator bumps g whenever the worker set changes):
//   1. Workers of g-1 poll once a step; seeing generation g (or told
//      CheckpointAndStop, or sent SIGTERM) they stop at the next step boundary
//      (all ranks agree through the step's collective) and report Checkpointed
//      with stateStep = the step of the whole-job state they now hold and serve.
//      A worker whose collective fails (a peer died) rolls back to the last
//      completed step and reports Checkpointed with reason PeerLost.
//   2. Until every worker of g-1 has reported or is gone, members of g get action
//      Wait; then Run with a RestorePlan: from peers (the step and the workers
//      holding it; a worker that holds it already uses its own), from the durable
//      checkpoint in checkpointDir, or fresh. They restore, rendezvous under
//      `prefix`, report Running, and train.
//   3. With certificateEvery K > 0, rank 0 computes the digest of the whole
//      job's state after every K-th step (a Certificate) and carries the newest
//      in each report; the operator keeps the newest in the job's status and
//      the history in the job's ConfigMap.
//   4. Failures are reported (state Failed, a CamelCase reason and a message);
//      the operator restarts the generation with backoff, up to a limit.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/job_spec.h"
#include "easyscale/common/status.h"

namespace easyscale {

inline constexpr const char* kControlApiVersion = "easyscale.io/control/v2";

// A worker process exits with this code when retrying cannot help (bad input,
// a corrupt file); any other failure is worth a restart.
inline constexpr int kPermanentExitCode = 3;
// The report reason of such a failure.
inline constexpr const char* kPermanentErrorReason = "PermanentError";

// Where the workers of one generation meet to build their communicator: an
// HTTP key-value store (the operator's control endpoint, or the runner of
// `easyscale-worker local`) and a key prefix unique to the generation.
struct Rendezvous {
  std::string url;     // http://host:port
  std::string prefix;  // e.g. "gen-7-2f9c"
  bool operator==(const Rendezvous&) const = default;
};

// Where a generation's first state comes from.
enum class RestoreFrom { kFresh, kPeers, kDurable };

// A worker that holds the job's state and serves it (GET /v1/state).
struct StateSource {
  std::string pod;
  std::string url;  // http://ip:port
  bool operator==(const StateSource&) const = default;
};

struct RestorePlan {
  RestoreFrom from = RestoreFrom::kFresh;
  int64_t step = 0;                  // kPeers: the step every source holds
  std::vector<StateSource> sources;  // kPeers: in the order to try
  bool operator==(const RestorePlan&) const = default;
};

enum class WorkerAction { kRun, kWait, kCheckpointAndStop };

// The trained model's files a worker wrote (worker/.../model_output.h): the
// folder and each file's SHA-256 (lowercase hex; empty when that file was not
// written, e.g. no ONNX for a built-in model).
struct OutputDigests {
  std::string path;
  std::string onnxSha256;
  std::string safetensorsSha256;
  bool operator==(const OutputDigests&) const = default;
};

// The consistency certificate: the digest of the whole job's training state
// after global step `step` (parameters, optimizer state and every EST's
// context; the digest the job prints at its end, README "Digest"). It depends
// on the logical training state only: every run of the job, on any workers,
// schedule or device types, certifies the same pairs. Its line, as
// `easyscale-worker local` prints it and the job's ConfigMap keeps it:
//   certificate step=<N> digest=<64 lowercase hex>
struct Certificate {
  int64_t step = 0;  // >= 1; 0: no certificate
  std::string digest;
  bool operator==(const Certificate&) const = default;
};

struct WorkerAssignment {
  std::string job;         // namespace/name
  int64_t generation = 0;  // grows with every reconfiguration
  int rank = 0;
  int worldSize = 1;
  int totalEsts = 1;
  std::vector<int> ests;  // ascending EST ids this worker hosts
  Rendezvous rendezvous;
  RestorePlan restore;
  // Durable checkpoints (a volume's folder keyed by the job's UID); empty = none.
  std::string checkpointDir;
  std::string backend = "cpu";  // cpu | cuda
  TrainingArgs training;
  OutputSpec output;  // where rank 0 writes the trained model; empty path: nowhere
  WorkerAction action = WorkerAction::kRun;
  // Checkpoint and stop after this global step; 0 = train to training.steps.
  int64_t stopAtStep = 0;
  // Rank 0 certifies every step that is a multiple of this; 0 = none.
  int64_t certificateEvery = 0;
  bool operator==(const WorkerAssignment&) const = default;
};

enum class WorkerState { kStarting, kRestoring, kRunning, kCheckpointed, kSucceeded, kFailed };

struct WorkerReport {
  std::string job;
  std::string pod;
  int64_t generation = 0;
  int rank = 0;
  WorkerState state = WorkerState::kStarting;
  int64_t step = 0;
  double samplesPerSecond = 0.0;
  std::string digest;          // set when state is kSucceeded
  double testAccuracy = -1.0;  // set when state is kSucceeded
  OutputDigests output;        // rank 0, kSucceeded with an output path: the files written
  std::string message;
  // Why it stopped or failed, CamelCase (PeerLost, RendezvousFailed,
  // StateUnavailable, BackendFailed, InvalidInput, ...); empty when asked to.
  std::string reason;
  int64_t stateStep = -1;  // step of the whole-job state it holds and serves; -1: none
  std::string stateUrl;    // where it serves that state
  // Rank 0: the newest certificate this process computed (repeated in every
  // report until the next, so one lost report loses none); step 0: none.
  Certificate certificate;
  bool operator==(const WorkerReport&) const = default;
};

const char* ToString(WorkerState s);
const char* ToString(WorkerAction a);
const char* ToString(RestoreFrom f);

// The header every protocol call carries.
inline constexpr const char* kAuthorizationHeader = "Authorization";
std::string BearerToken(const std::string& token);
// The token of an "Authorization: Bearer <token>" value; "" when malformed.
std::string TokenFromAuthorization(const std::string& header);
// Whether the "Authorization" header `header` carries `token` (non-empty),
// compared in constant time.
bool AuthorizedBy(const std::string& header, const std::string& token);

nlohmann::json ToJson(const RestorePlan& p);
nlohmann::json ToJson(const WorkerAssignment& a);
nlohmann::json ToJson(const WorkerReport& r);
// Leaves out the digests of files not written (as the CRD's status.output does).
nlohmann::json ToJson(const OutputDigests& d);
// Both check apiVersion and every field; errors name the field.
StatusOr<WorkerAssignment> ParseWorkerAssignment(const nlohmann::json& j);
StatusOr<WorkerReport> ParseWorkerReport(const nlohmann::json& j);
StatusOr<RestorePlan> ParseRestorePlan(const nlohmann::json& j);
// Errors name the field under `path` ("output.onnxSha256: ...").
StatusOr<OutputDigests> ParseOutputDigests(const nlohmann::json& j, const std::string& path);

nlohmann::json ToJson(const Certificate& c);
// step >= 1 and a SHA-256 in lowercase hex; errors name the field under `path`.
StatusOr<Certificate> ParseCertificate(const nlohmann::json& j, const std::string& path);
// "certificate step=N digest=HEX" and back; the error quotes the line.
std::string CertificateLine(const Certificate& c);
StatusOr<Certificate> ParseCertificateLine(const std::string& line);

}  // namespace easyscale
