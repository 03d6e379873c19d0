#include "state_server.h"

#include <httplib.h>

#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"

namespace easyscale {

StatusOr<std::unique_ptr<StateServer>> StateServer::Start(const StateServerOptions& o) {
  auto s = std::unique_ptr<StateServer>(new StateServer());
  s->job_ = o.job;
  s->token_ = o.token;
  HttpRoutes routes;
  StateServer* self = s.get();
  routes.Handle("GET", "/v1/state", [self](const HttpRequest& req) { return self->Serve(req); });
  HttpServerOptions options;
  options.name = "state";
  options.address = o.address;
  options.maxBodyBytes = 1024;  // requests carry no body
  // A snapshot is as large as the model and its optimizer state.
  options.writeTimeout = std::chrono::minutes(10);
  ES_ASSIGN_OR_RETURN(s->server_, HttpServer::Start(options, std::move(routes)));
  s->url_ = "http://" + o.advertisedHost + ":" + std::to_string(s->server_->port());
  return s;
}

void StateServer::Hold(const TrainingSnapshot& s) {
  auto encoded = std::make_shared<const std::string>(EncodeSnapshot(s));
  std::lock_guard<std::mutex> lock(mu_);
  step_ = s.step;
  encoded_ = std::move(encoded);
}

void StateServer::Drop() {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = -1;
  encoded_.reset();
}

HttpResponse StateServer::Serve(const HttpRequest& req) const {
  if (!AuthorizedBy(req.Header("authorization"), token_) || req.Query("job") != job_) {
    return {.status = 401, .body = "not this job's token\n"};
  }
  std::shared_ptr<const std::string> encoded;
  int64_t step = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    encoded = encoded_;
    step = step_;
  }
  if (!encoded || req.Query("step") != std::to_string(step)) {
    return {.status = 404, .body = "this worker holds step " + std::to_string(step) + "\n"};
  }
  return {.contentType = "application/octet-stream", .body = *encoded};
}

StatusOr<TrainingSnapshot> FetchSnapshot(const RestorePlan& plan, int rank, const std::string& job,
                                         const std::string& token,
                                         std::chrono::milliseconds timeout) {
  std::string errors;
  const size_t n = plan.sources.size();
  for (size_t i = 0; i < n; ++i) {
    const StateSource& source = plan.sources[(static_cast<size_t>(rank) + i) % n];
    httplib::Client client(source.url);
    client.set_connection_timeout(std::chrono::seconds(2));
    client.set_read_timeout(timeout);
    const std::string path = "/v1/state?job=" + httplib::detail::encode_query_param(job) +
                             "&step=" + std::to_string(plan.step);
    auto res = client.Get(path, {{kAuthorizationHeader, BearerToken(token)}});
    std::string why;
    if (!res) {
      why = "unreachable: " + httplib::to_string(res.error());
    } else if (res->status != 200) {
      why = "answered " + std::to_string(res->status) + ": " + res->body.substr(0, 200);
    } else {
      StatusOr<TrainingSnapshot> s = DecodeSnapshot(res->body, "state from " + source.pod);
      if (s.ok() && s->step == plan.step) {
        LogInfo("worker", "state fetched",
                {{"from", source.pod}, {"step", s->step}, {"bytes", res->body.size()}});
        return s;
      }
      why = s.ok() ? "holds step " + std::to_string(s->step) : std::string(s.status().message());
    }
    LogWarn("worker", "state source failed", {{"from", source.pod}, {"error", why}});
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", source.pod, ": ", why);
  }
  return absl::UnavailableError(
      absl::StrCat("no worker could give the job's state at step ", plan.step, " (", errors, ")"));
}

}  // namespace easyscale
