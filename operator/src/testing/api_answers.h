// File: operator/src/testing/api_answers.h
//
// What the test API server writes on the wire: JSON that never throws while
// being written (bytes that are not UTF-8 become U+FFFD, as Go's encoder
// writes them), kube's metav1.Status objects for errors, and the map from
// the store's Status codes to HTTP codes and reasons.
//   SendStatus(res, 404, "NotFound", "pods \"a\" not found");
//   SendError(res, absl::AbortedError("..."));   // 409 Conflict
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "easyscale/common/status.h"

namespace easyscale::op::testing {

// kube-apiserver's limit on a request body; larger ones are answered 413.
inline constexpr size_t kMaxBodyBytes = 3 * 1024 * 1024;

// `j` as compact JSON; never throws.
std::string WireJson(const nlohmann::json& j);

// A metav1.Status object of a failure.
nlohmann::json StatusObject(int code, const std::string& reason, const std::string& message);

// `s` carrying a Status object's `details` (name, group, kind, causes), which
// SendError writes into its answer.
Status WithStatusDetails(Status s, const nlohmann::json& details);

// Answers `code` with a Status object; 429 also says when to retry.
void SendStatus(httplib::Response& res, int code, const std::string& reason,
                const std::string& message);

// Answers a store error: NotFound 404, AlreadyExists 409, Aborted 409
// Conflict, InvalidArgument 422, FailedPrecondition 400, OutOfRange 410,
// ResourceExhausted 429, anything else 500; with the details WithStatusDetails
// attached.
void SendError(httplib::Response& res, const Status& s);

// Fills an error answer that has no body yet (httplib's own 404, 413, ...)
// with the Status object kube-apiserver would send.
void FillEmptyErrorAnswer(httplib::Response& res);

}  // namespace easyscale::op::testing
