// File: easyscale/worker/checkpoint.h
//
// Checkpoints of a job: one folder per step, written by all workers together.
//   <dir>/ckpt-<step>/job.esck          step, parameters, optimizer (rank 0)
//   <dir>/ckpt-<step>/est-<id>.esck     one EST context (its host worker)
//   <dir>/ckpt-<step>/MANIFEST.json     files and SHA-256s (rank 0, after a barrier)
//   <dir>/LATEST                        "ckpt-<step>", replaced atomically last
// Every file is written atomically (temporary file, fsync, rename), so an
// interrupted save leaves the previous complete checkpoint intact: nothing
// saved is lost. Each .esck file is an envelope:
//   "ESCKPT01" | u32 version | u32 kind | u64 payload size | payload | sha256(all before)
// and is validated (size, version, kind, checksum, manifest hash) on load.
//
// A checkpoint is committed once its MANIFEST.json is written. LATEST names
// the newest committed one, but it is a hint: a resume scans the step folders
// (NewestRestorable), so a deleted LATEST or a damaged newest checkpoint
// costs the steps since the previous one, never the whole run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/worker/snapshot.h"

namespace easyscale {

// kSnapshot: a whole TrainingSnapshot in one envelope (the network hand-over).
enum class CheckpointKind : uint32_t { kJob = 1, kEst = 2, kSnapshot = 3 };

// Where a resume starts, and what it passed over on the way.
struct RestorePoint {
  // The newest checkpoint whose every file verifies; none: the folder holds
  // no checkpoint (at most saves interrupted before their commit), start at 0.
  std::optional<int64_t> step;
  // Each newer step folder that cannot be used, newest first: "<file>: <why>".
  std::vector<std::string> skipped;
  // Why LATEST was not what it should be ("" when it names `step`).
  std::string latest;
};

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string dir) : dir_(std::move(dir)) {}

  // Verifies the step folders newest first (every file against the manifest
  // and its envelope) and returns the first intact one. Every worker of a
  // generation verifies every file, so all of them choose the same step.
  // DataLoss, listing each folder and why it is unusable, when checkpoints
  // were committed (LATEST exists or a folder has a manifest) but none is
  // intact: the run must not silently start again at step 0.
  StatusOr<RestorePoint> NewestRestorable() const;
  Status WriteJob(int64_t step, const std::string& payload) const;
  Status WriteEst(int64_t step, int est, const std::string& payload) const;
  // Rank 0, once every EST file of `step` is on disk: writes the manifest and
  // moves LATEST. Retention: keeps the new checkpoint and the newest committed
  // one before it (the previous checkpoint, a fall-back should the new one be
  // damaged), and removes the step folders older than that one. Folders newer
  // than `step` (left by a run that resumed from an older checkpoint) stay
  // until training saves their step again, which replaces their files.
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
  // The step folders, newest first.
  std::vector<int64_t> Steps() const;
  bool Committed(int64_t step) const;
  // OK when every file the manifest of `step` lists is intact.
  Status Verify(int64_t step) const;
  std::string dir_;
};

std::string EncodeEnvelope(CheckpointKind kind, const std::string& payload);
// Returns the payload; errors name `what` and say what is wrong.
StatusOr<std::string> DecodeEnvelope(const std::string& bytes, CheckpointKind kind,
                                     const std::string& what);

}  // namespace easyscale
