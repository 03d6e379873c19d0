// File: easyscale/worker/checkpoint.h
//
// Checkpoints of a job: one folder per step, written by all workers together.
//   <dir>/ckpt-<step>/job.esck          step, parameters, optimizer (rank 0)
//   <dir>/ckpt-<step>/est-<id>.esck     one EST context (its host worker)
//   <dir>/ckpt-<step>/MANIFEST.json     files and SHA-256s (rank 0, after a barrier)
//   <dir>/LATEST                        "ckpt-<step>", replaced atomically last
// Every file is written atomically (temporary file, fsync, rename), so an
// interrupted save leaves LATEST on the previous complete checkpoint: nothing
// saved is lost. Each .esck file is an envelope:
//   "ESCKPT01" | u32 version | u32 kind | u64 payload size | payload | sha256(all before)
// and is validated (size, version, kind, checksum, manifest hash) on load.
#pragma once

#include <cstdint>
#include <string>

#include "easyscale/common/status.h"
#include "easyscale/worker/snapshot.h"

namespace easyscale {

// kSnapshot: a whole TrainingSnapshot in one envelope (the network hand-over).
enum class CheckpointKind : uint32_t { kJob = 1, kEst = 2, kSnapshot = 3 };

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string dir) : dir_(std::move(dir)) {}

  // Step of the newest complete checkpoint; NotFound when there is none.
  StatusOr<int64_t> LatestStep() const;
  Status WriteJob(int64_t step, const std::string& payload) const;
  Status WriteEst(int64_t step, int est, const std::string& payload) const;
  // Rank 0, once every EST file of `step` is on disk: writes the manifest and
  // moves LATEST, then removes checkpoints older than the previous one.
  Status Commit(int64_t step, int total_ests) const;
  StatusOr<std::string> ReadJob(int64_t step) const;
  StatusOr<std::string> ReadEst(int64_t step, int est) const;
  // A whole snapshot: every EST of the job and the job state, then Commit.
  Status Save(const TrainingSnapshot& s, int total_ests) const;
  // The snapshot of the committed checkpoint at `step`, every file verified.
  StatusOr<TrainingSnapshot> Load(int64_t step, int total_ests) const;

  const std::string& dir() const { return dir_; }
  std::string StepDir(int64_t step) const;

 private:
  StatusOr<std::string> ReadVerified(int64_t step, const std::string& name,
                                     CheckpointKind kind) const;
  std::string dir_;
};

std::string EncodeEnvelope(CheckpointKind kind, const std::string& payload);
// Returns the payload; errors name `what` and say what is wrong.
StatusOr<std::string> DecodeEnvelope(const std::string& bytes, CheckpointKind kind,
                                     const std::string& what);

}  // namespace easyscale
