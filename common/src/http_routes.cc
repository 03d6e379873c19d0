// Requests, routes and listen addresses: the parts of the HTTP server that do
// not touch a socket.
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "easyscale/common/http_server.h"

namespace easyscale {

namespace {

std::string Find(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

}  // namespace

std::string HttpRequest::Query(const std::string& name) const { return Find(query, name); }

std::string HttpRequest::Header(const std::string& lowerCaseName) const {
  return Find(headers, lowerCaseName);
}

void HttpRoutes::Handle(std::string method, std::string path, HttpHandler handler) {
  byPath_[std::move(path)][std::move(method)] = std::move(handler);
}

HttpResponse HttpRoutes::Serve(const HttpRequest& request) const {
  auto path = byPath_.find(request.path);
  if (path == byPath_.end()) return {.status = 404, .body = "not found\n"};
  auto handler = path->second.find(request.method);
  if (handler != path->second.end()) return handler->second(request);
  std::vector<std::string> allowed;
  for (const auto& [method, unused] : path->second) allowed.push_back(method);
  return {.status = 405,
          .body = "method not allowed\n",
          .headers = {{"Allow", absl::StrJoin(allowed, ", ")}}};
}

StatusOr<ListenAddress> ParseListenAddress(const std::string& flag, const std::string& text) {
  const size_t colon = text.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(text.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": want host:port (e.g. :8080), got \"", text, "\""));
  }
  std::string host = text.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return ListenAddress{.host = host.empty() ? "0.0.0.0" : host, .port = port};
}

}  // namespace easyscale
