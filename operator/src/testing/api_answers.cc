// kube's error answers and a JSON writer that cannot fail.
#include "api_answers.h"

#include "absl/strings/cord.h"

namespace easyscale::op::testing {

using nlohmann::json;

namespace {

constexpr absl::string_view kDetailsPayload = "easyscale.io/testing/StatusDetails";

void SendStatusWith(httplib::Response& res, int code, const std::string& reason,
                    const std::string& message, const json& details) {
  json status = StatusObject(code, reason, message);
  if (!details.is_null()) status["details"] = details;
  res.status = code;
  if (code == 429) res.set_header("Retry-After", "1");
  res.set_content(WireJson(status), "application/json");
}

}  // namespace

Status WithStatusDetails(Status s, const json& details) {
  s.SetPayload(kDetailsPayload, absl::Cord(WireJson(details)));
  return s;
}

std::string WireJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json StatusObject(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

void SendStatus(httplib::Response& res, int code, const std::string& reason,
                const std::string& message) {
  SendStatusWith(res, code, reason, message, json());
}

void SendError(httplib::Response& res, const Status& s) {
  const std::string msg(s.message());
  const absl::optional<absl::Cord> details = s.GetPayload(kDetailsPayload);
  if (details) {
    const int code = s.code() == absl::StatusCode::kInvalidArgument ? 422 : 400;
    return SendStatusWith(res, code, code == 422 ? "Invalid" : "BadRequest", msg,
                          json::parse(std::string(*details), nullptr, false));
  }
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return SendStatus(res, 404, "NotFound", msg);
    case absl::StatusCode::kAlreadyExists:
      return SendStatus(res, 409, "AlreadyExists", msg);
    case absl::StatusCode::kAborted:
      return SendStatus(res, 409, "Conflict", msg);
    case absl::StatusCode::kInvalidArgument:
      return SendStatus(res, 422, "Invalid", msg);
    case absl::StatusCode::kFailedPrecondition:
      return SendStatus(res, 400, "BadRequest", msg);
    case absl::StatusCode::kOutOfRange:
      return SendStatus(res, 410, "Expired", msg);
    case absl::StatusCode::kResourceExhausted:
      return SendStatus(res, 429, "TooManyRequests", msg);
    default:
      return SendStatus(res, 500, "InternalError", msg);
  }
}

void FillEmptyErrorAnswer(httplib::Response& res) {
  if (!res.body.empty() || res.status < 400) return;
  switch (res.status) {
    case 404:
      return SendStatus(res, 404, "NotFound", "the server could not find the requested resource");
    case 413:
      return SendStatus(res, 413, "RequestEntityTooLarge",
                        absl::StrCat("Request entity too large: limit is ", kMaxBodyBytes));
    case 414:
      return SendStatus(res, 414, "RequestURITooLong", "the request URI is too long");
    case 400:
      return SendStatus(res, 400, "BadRequest", "the request is malformed");
    default:
      return SendStatus(res, res.status, "InternalError", "the request could not be served");
  }
}

}  // namespace easyscale::op::testing
