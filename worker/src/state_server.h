// File: worker/src/state_server.h
//
// The worker's state endpoint (control_protocol.h: GET /v1/state): every
// worker ends each generation holding the whole job's state, and serves it to
// the workers of the next generation that hold none of it (new workers on a
// scale-out, or every worker when all of the old ones leave). Only callers
// with the job's control token are answered.
//   StateServer server(options);
//   server.Hold(snapshot);                      // what generation g ended with
//   auto s = FetchSnapshot(plan, rank, job, token, timeout);  // on a new worker
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "easyscale/common/control_protocol.h"
#include "easyscale/common/http_server.h"
#include "easyscale/worker/snapshot.h"

namespace easyscale {

struct StateServerOptions {
  std::string address;  // host:port; port 0 = any
  std::string job;
  std::string token;
  std::string advertisedHost;  // the pod IP peers reach
};

class StateServer {
 public:
  static StatusOr<std::unique_ptr<StateServer>> Start(const StateServerOptions& options);
  // Serves `s` from now on (encoded once); Drop serves nothing.
  void Hold(const TrainingSnapshot& s);
  void Drop();
  std::string url() const { return url_; }

 private:
  StateServer() = default;
  HttpResponse Serve(const HttpRequest& req) const;

  std::string job_, token_, url_;
  mutable std::mutex mu_;
  int64_t step_ = -1;
  std::shared_ptr<const std::string> encoded_;
  std::unique_ptr<HttpServer> server_;
};

// The job's state at plan.step from the first of plan.sources that has it
// (starting at `rank` modulo their count, so new workers spread the load),
// verified (checksum, step). Unavailable when none could give it.
StatusOr<TrainingSnapshot> FetchSnapshot(const RestorePlan& plan, int rank, const std::string& job,
                                         const std::string& token,
                                         std::chrono::milliseconds timeout);

}  // namespace easyscale
