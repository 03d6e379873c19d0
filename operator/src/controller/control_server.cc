// Routes of the control endpoint.
#include "controller/control_server.h"

#include "easyscale/common/rendezvous_store.h"

namespace easyscale::op {

using nlohmann::json;

namespace {

// The caller must be this replica's business (the leader) and hold the job's token.
Status Admit(const ControlServerHooks& hooks, ControlBook* book, const HttpRequest& req,
             const std::string& job) {
  if (!hooks.serving()) return absl::UnavailableError("not the leader");
  return book->Authenticate(job, req.Header("authorization"));
}

}  // namespace

void InstallControlRoutes(HttpRoutes& routes, ControlBook* book, ControlServerHooks hooks) {
  routes.Handle("GET", "/v1/assignment", [book, hooks](const HttpRequest& req) {
    const std::string job = req.Query("job");
    const std::string pod = req.Query("pod");
    if (job.empty() || pod.empty()) {
      return ErrorResponse(absl::InvalidArgumentError("query parameters job and pod are required"));
    }
    if (Status s = Admit(hooks, book, req, job); !s.ok()) return ErrorResponse(s);
    StatusOr<WorkerAssignment> a = book->AssignmentFor(job, pod);
    if (!a.ok()) return ErrorResponse(a.status());
    return HttpResponse{.contentType = "application/json", .body = ToJson(*a).dump()};
  });
  routes.Handle("POST", "/v1/report", [book, hooks](const HttpRequest& req) {
    const json body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) {
      return ErrorResponse(absl::InvalidArgumentError("report: body is not a JSON object"));
    }
    StatusOr<WorkerReport> r = ParseWorkerReport(body);
    if (!r.ok()) return ErrorResponse(absl::InvalidArgumentError(r.status().message()));
    if (Status s = Admit(hooks, book, req, r->job); !s.ok()) return ErrorResponse(s);
    StatusOr<bool> news = book->Record(*r);
    if (!news.ok()) return ErrorResponse(news.status());
    if (*news) hooks.onReport(r->job);
    return HttpResponse{.status = 204};
  });
  for (const char* method : {"GET", "PUT"}) {
    routes.Handle(method, "/v1/store", [book, hooks](const HttpRequest& req) {
      const std::string job = req.Query("job");
      if (job.empty()) {
        return ErrorResponse(absl::InvalidArgumentError("query parameter job is required"));
      }
      if (Status s = Admit(hooks, book, req, job); !s.ok()) return ErrorResponse(s);
      StatusOr<std::shared_ptr<RendezvousStore>> store = book->Store(job);
      if (!store.ok()) return ErrorResponse(store.status());
      return ServeRendezvousStore(req, **store);
    });
  }
}

}  // namespace easyscale::op
