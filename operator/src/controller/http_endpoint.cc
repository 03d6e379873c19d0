// Starts and stops an httplib server.
#include "controller/http_endpoint.h"

#include <httplib.h>

#include "absl/strings/numbers.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"

namespace easyscale::op {

StatusOr<std::pair<std::string, int>> ParseListenAddress(const std::string& flag,
                                                         const std::string& addr) {
  const size_t colon = addr.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(addr.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": want host:port (e.g. :8080), got \"", addr, "\""));
  }
  std::string host = addr.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return std::make_pair(host.empty() ? std::string("0.0.0.0") : host, port);
}

StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& name, const std::string& addr,
    const std::function<void(httplib::Server&)>& install) {
  ES_ASSIGN_OR_RETURN(auto hp, ParseListenAddress("--" + name + "-addr", addr));
  auto e = std::unique_ptr<HttpEndpoint>(new HttpEndpoint());
  e->server_ = std::make_unique<httplib::Server>();
  e->server_->set_tcp_nodelay(true);
  install(*e->server_);
  if (hp.second == 0) {
    e->port_ = e->server_->bind_to_any_port(hp.first);
  } else {
    e->port_ = e->server_->bind_to_port(hp.first, hp.second) ? hp.second : -1;
  }
  if (e->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("--", name, "-addr: cannot listen on ", addr));
  }
  httplib::Server* s = e->server_.get();
  e->thread_ = std::thread([s] { s->listen_after_bind(); });
  LogInfo("operator", "listening", {{"endpoint", name}, {"host", hp.first}, {"port", e->port_}});
  return e;
}

HttpEndpoint::~HttpEndpoint() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace easyscale::op
