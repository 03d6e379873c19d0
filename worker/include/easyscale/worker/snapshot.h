// File: easyscale/worker/snapshot.h
//
// The whole training state of a job at a step boundary, in memory: what a
// checkpoint holds on disk and what live workers hand to each other over the
// network. Every worker holds one after each step (parameters and optimizer
// state are the same everywhere; every EST's context is replicated through the
// step's collective), so any survivor can hand the job on.
//
//   job    JobPayload: identity JSON, step, parameters, optimizer state
//   ests   EST id -> EstContext bytes (est_context.h), one per EST of the job
//
// Wire form (EncodeSnapshot): the checkpoint envelope (checkpoint.h) of kind
// kSnapshot around  u64 step | str job | u32 count | (u32 id | str context)*.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "easyscale/common/status.h"

namespace easyscale {

struct TrainingSnapshot {
  int64_t step = 0;
  std::string job;
  std::map<int, std::string> ests;
  bool operator==(const TrainingSnapshot&) const = default;
};

std::string EncodeSnapshot(const TrainingSnapshot& s);
// Validates the envelope (size, kind, checksum) and the layout; errors name `what`.
StatusOr<TrainingSnapshot> DecodeSnapshot(const std::string& bytes, const std::string& what);

}  // namespace easyscale
