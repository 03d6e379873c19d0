#include "easyscale/common/rendezvous_store.h"

#include <nlohmann/json.hpp>

namespace easyscale {

void RendezvousStore::SetPrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  if (prefix == prefix_) return;
  prefix_ = prefix;
  values_.clear();
}

Status RendezvousStore::CheckPrefixLocked(const std::string& key) const {
  if (prefix_.empty() || key.size() <= prefix_.size() + 1 ||
      key.compare(0, prefix_.size(), prefix_) != 0 || key[prefix_.size()] != '/') {
    return absl::FailedPreconditionError("key \"" + key.substr(0, 100) +
                                         "\" is not under the current generation's prefix \"" +
                                         prefix_ + "/\"");
  }
  return absl::OkStatus();
}

Status RendezvousStore::Put(const std::string& key, std::string value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status s = CheckPrefixLocked(key); !s.ok()) return s;
  if (value.size() > limits_.maxValueBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("value of ", value.size(), " bytes; at most ", limits_.maxValueBytes));
  }
  if (values_.size() >= limits_.maxKeys && values_.count(key) == 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the generation already holds ", values_.size(), " keys"));
  }
  values_[key] = std::move(value);
  return absl::OkStatus();
}

StatusOr<std::string> RendezvousStore::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status s = CheckPrefixLocked(key); !s.ok()) return s;
  auto it = values_.find(key);
  if (it == values_.end()) return absl::NotFoundError("no key \"" + key.substr(0, 100) + "\" yet");
  return it->second;
}

size_t RendezvousStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return values_.size();
}

HttpResponse ErrorResponse(const Status& s) {
  int code = 503;
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      code = 400;
      break;
    case absl::StatusCode::kUnauthenticated:
      code = 401;
      break;
    case absl::StatusCode::kPermissionDenied:
      code = 403;
      break;
    case absl::StatusCode::kNotFound:
      code = 404;
      break;
    case absl::StatusCode::kFailedPrecondition:
      code = 409;
      break;
    case absl::StatusCode::kResourceExhausted:
      code = 413;
      break;
    default:
      break;
  }
  return {.status = code,
          .contentType = "application/json",
          .body = nlohmann::json{{"error", std::string(s.message())}}.dump()};
}

HttpResponse ServeRendezvousStore(const HttpRequest& request, RendezvousStore& store) {
  const std::string key = request.Query("key");
  if (key.empty())
    return ErrorResponse(absl::InvalidArgumentError("query parameter key is required"));
  if (request.method == "PUT") {
    if (Status s = store.Put(key, request.body); !s.ok()) return ErrorResponse(s);
    return {.status = 204};
  }
  StatusOr<std::string> value = store.Get(key);
  if (!value.ok()) return ErrorResponse(value.status());
  return {.contentType = "application/octet-stream", .body = std::move(*value)};
}

}  // namespace easyscale
