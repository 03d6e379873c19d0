// File: operator/src/controller/http_endpoint.h
//
// One HTTP server on "host:port" (":port" = all interfaces, port 0 = any),
// serving the routes `install` adds, on its own thread.
//   auto e = HttpEndpoint::Start("health", ":8081", [](httplib::Server& s) { ... });
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "easyscale/common/status.h"

namespace httplib {
class Server;
}

namespace easyscale::op {

class HttpEndpoint {
 public:
  static StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& name, const std::string& addr,
      const std::function<void(httplib::Server&)>& install);
  ~HttpEndpoint();
  int port() const { return port_; }

 private:
  HttpEndpoint() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// Splits "host:port"; an empty host means 0.0.0.0. Errors name `flag`.
StatusOr<std::pair<std::string, int>> ParseListenAddress(const std::string& flag,
                                                         const std::string& addr);

}  // namespace easyscale::op
