// Routes of the control endpoint.
#include "controller/control_server.h"

#include <httplib.h>

namespace easyscale::op {

using nlohmann::json;

namespace {

void Error(httplib::Response& res, int code, const std::string& message) {
  res.status = code;
  res.set_content(json{{"error", message}}.dump(), "application/json");
}

}  // namespace

void InstallControlRoutes(httplib::Server& server, ControlBook* book, ControlServerHooks hooks) {
  server.Get("/v1/assignment", [book, hooks](const httplib::Request& req, httplib::Response& res) {
    const std::string job = req.get_param_value("job");
    const std::string pod = req.get_param_value("pod");
    if (job.empty() || pod.empty())
      return Error(res, 400, "query parameters job and pod are required");
    if (!hooks.serving()) return Error(res, 503, "not the leader");
    StatusOr<WorkerAssignment> a = book->AssignmentFor(job, pod);
    if (absl::IsNotFound(a.status())) return Error(res, 404, std::string(a.status().message()));
    if (!a.ok()) return Error(res, 503, std::string(a.status().message()));
    res.set_content(ToJson(*a).dump(), "application/json");
  });
  server.Post("/v1/report", [book, hooks](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) return Error(res, 400, "report: body is not a JSON object");
    StatusOr<WorkerReport> r = ParseWorkerReport(body);
    if (!r.ok()) return Error(res, 400, std::string(r.status().message()));
    if (!hooks.serving()) return Error(res, 503, "not the leader");
    if (book->Record(*r)) hooks.onReport(r->job);
    res.status = 204;
  });
}

}  // namespace easyscale::op
