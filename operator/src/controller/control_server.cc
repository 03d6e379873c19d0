// Routes of the control endpoint.
#include "controller/control_server.h"

namespace easyscale::op {

using nlohmann::json;

namespace {

HttpResponse Error(int code, const std::string& message) {
  return {
      .status = code, .contentType = "application/json", .body = json{{"error", message}}.dump()};
}

}  // namespace

void InstallControlRoutes(HttpRoutes& routes, ControlBook* book, ControlServerHooks hooks) {
  routes.Handle("GET", "/v1/assignment", [book, hooks](const HttpRequest& req) {
    const std::string job = req.Query("job");
    const std::string pod = req.Query("pod");
    if (job.empty() || pod.empty()) return Error(400, "query parameters job and pod are required");
    if (!hooks.serving()) return Error(503, "not the leader");
    StatusOr<WorkerAssignment> a = book->AssignmentFor(job, pod);
    if (absl::IsNotFound(a.status())) return Error(404, std::string(a.status().message()));
    if (!a.ok()) return Error(503, std::string(a.status().message()));
    return HttpResponse{.contentType = "application/json", .body = ToJson(*a).dump()};
  });
  routes.Handle("POST", "/v1/report", [book, hooks](const HttpRequest& req) {
    const json body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) return Error(400, "report: body is not a JSON object");
    StatusOr<WorkerReport> r = ParseWorkerReport(body);
    if (!r.ok()) return Error(400, std::string(r.status().message()));
    if (!hooks.serving()) return Error(503, "not the leader");
    if (book->Record(*r)) hooks.onReport(r->job);
    return HttpResponse{.status = 204};
  });
}

}  // namespace easyscale::op
