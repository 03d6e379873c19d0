// File: operator/src/controller/control_server.h
//
// The worker control protocol's HTTP face (common/control_protocol.h):
//   GET  /v1/assignment?job=ns/name&pod=P  -> 200 WorkerAssignment | 404
//   POST /v1/report                        -> 204 | 400 | 403 (not in the plan)
//   PUT  /v1/store?job=J&key=K             -> 204 | 409 (stale generation) | 413
//   GET  /v1/store?job=J&key=K             -> 200 | 404 (not yet) | 409 (stale)
// Every call needs the job's token (401 without). 503 while this replica is
// not the leader or has no plan for the job yet (just after a takeover):
// workers retry instead of exiting. Nothing is kept for refused calls.
#pragma once

#include <functional>
#include <string>

#include "controller/control_book.h"
#include "easyscale/common/http_server.h"

namespace easyscale::op {

struct ControlServerHooks {
  std::function<bool()> serving;                         // leader with synced caches
  std::function<void(const std::string& job)> onReport;  // a report said something new
};

void InstallControlRoutes(HttpRoutes& routes, ControlBook* book, ControlServerHooks hooks);

}  // namespace easyscale::op
