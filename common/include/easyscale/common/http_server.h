// File: easyscale/common/http_server.h
//
// A small HTTP/1.1 server for the operator's endpoints (health, metrics, worker
// control), made to stay responsive when clients are slow, idle or hostile:
// asynchronous on a few io threads (an idle or slow socket costs a file
// descriptor, never a thread), a deadline for the whole request head, bounded
// connections per client address and in total, bounded head and body sizes.
//
//   HttpRoutes routes;
//   routes.Handle("GET", "/healthz", [](const HttpRequest&) {
//     return HttpResponse{.body = "ok\n"};
//   });
//   ES_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server,
//                       HttpServer::Start({.name = "health", .address = ":8081"}, routes));
//
// Handlers run on the io threads, several at once: they must be thread-safe,
// short (in-memory lookups) and must not block, or they hold up every other
// connection of their thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale {

struct HttpRequest {
  std::string method;
  std::string path;  // the target before '?', as sent (not percent-decoded)
  std::string body;
  std::string remoteAddress;                   // the peer's IP address
  std::map<std::string, std::string> query;    // decoded; the first of repeated names
  std::map<std::string, std::string> headers;  // names in lower case; repeats joined by ", "

  // "" when absent.
  std::string Query(const std::string& name) const;
  std::string Header(const std::string& lowerCaseName) const;
};

struct HttpResponse {
  int status = 200;
  std::string contentType = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// Handlers by exact path and method.
class HttpRoutes {
 public:
  // A second handler for the same method and path replaces the first.
  void Handle(std::string method, std::string path, HttpHandler handler);
  // The handler's response; 404 for an unknown path, 405 (with Allow) for a
  // known path and another method. A handler's exception propagates.
  HttpResponse Serve(const HttpRequest& request) const;

 private:
  std::map<std::string, std::map<std::string, HttpHandler>> byPath_;  // path -> method -> handler
};

// The defaults suit small control-plane requests (a request head normally
// arrives within milliseconds). Memory held for requests stays below
// maxConnections * (maxHeaderBytes + maxBodyBytes), 80 MiB by default.
struct HttpServerOptions {
  std::string name;     // in logs and errors: "health", "control"
  std::string address;  // "host:port"; ":port" = all interfaces; port 0 = any free port
  // Connections over these are closed as they are accepted. Per client: the
  // peer's IP address, so one client cannot take all the slots.
  size_t maxConnections = 1024;
  size_t maxConnectionsPerClient = 64;
  // The whole request head, from accept (or from the first byte of a later
  // request on a kept-alive connection); slower heads get 408.
  std::chrono::milliseconds headerTimeout{std::chrono::seconds(10)};
  std::chrono::milliseconds bodyTimeout{std::chrono::seconds(10)};  // the whole body; then 408
  // A kept-alive connection waits this long for its next request.
  std::chrono::milliseconds idleTimeout{std::chrono::seconds(30)};
  std::chrono::milliseconds writeTimeout{std::chrono::seconds(10)};  // the whole response
  size_t maxHeaderBytes = 16 * 1024;                                 // over: 431
  size_t maxBodyBytes = 64 * 1024;                                   // over: 413
  int ioThreads = 2;
};

// Where to listen: "host:port", ":port" (host 0.0.0.0) or "[v6]:port". Errors
// name `flag` (the flag or setting the text came from).
struct ListenAddress {
  std::string host;
  int port = 0;
};
StatusOr<ListenAddress> ParseListenAddress(const std::string& flag, const std::string& text);

class HttpServer {
 public:
  // Listens and serves `routes` on options.ioThreads threads until destroyed.
  static StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, HttpRoutes routes);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;  // the bound port (the chosen one for port 0)
  // Closes the listener and every connection, and waits for running handlers
  // (so never from a handler). Requests in flight are dropped. Safe to call
  // more than once.
  void Stop();

 private:
  class Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace easyscale
