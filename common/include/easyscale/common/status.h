// File: easyscale/common/status.h
//
// The project's one error type: absl::Status and absl::StatusOr<T>. Codes say
// what a caller should do:
//   kInvalidArgument, kFailedPrecondition, kDataLoss  -> bad input; do not retry
//   kUnavailable, kDeadlineExceeded                   -> transient; retry the call
//   kAborted                                          -> conflict (409); retry higher up
//   kNotFound, kAlreadyExists                         -> state answers; the caller decides
//
// Example:
//   absl::StatusOr<JobSpec> spec = ParseJobSpec(j);
//   if (!spec.ok()) return spec.status();
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace easyscale {

using Status = absl::Status;
template <typename T>
using StatusOr = absl::StatusOr<T>;

// True when retrying the same call later may succeed.
inline bool IsRetryable(const Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsAborted(s) ||
         absl::IsResourceExhausted(s);
}

}  // namespace easyscale
