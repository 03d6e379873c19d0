// File: common/src/testing/raw_http_client.h
//
// HTTP/1.1 over a plain blocking socket, byte by byte if need be, from a chosen
// loopback source address (every 127.x.y.z is this host, so each can play a
// different client): for tests of servers against slow, idle, malformed and
// many clients. Test-only; never linked into production code.
//   auto c = RawConnection::Open(port, "127.0.0.2");
//   (*c)->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
//   StatusOr<RawResponse> r = (*c)->Read(std::chrono::seconds(1));
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::testing {

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

class RawConnection {
 public:
  // Connects to 127.0.0.1:port from `source`.
  static StatusOr<std::unique_ptr<RawConnection>> Open(int port,
                                                       const std::string& source = "127.0.0.1");
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool Send(std::string_view bytes);
  // The next response (its body by Content-Length); an error when the server
  // closed the connection first or `timeout` passed.
  StatusOr<RawResponse> Read(std::chrono::milliseconds timeout);
  // True when the server closes or resets the connection within `timeout`;
  // whatever it sends before is read and dropped.
  bool ClosedByServer(std::chrono::milliseconds timeout);

 private:
  explicit RawConnection(int fd) : fd_(fd) {}
  // Reads more into received_ until `deadline`; false on close, error or timeout.
  bool ReadMore(std::chrono::steady_clock::time_point deadline);

  const int fd_;
  std::string received_;  // read but not yet returned
};

// One request on a new connection, "Connection: close".
StatusOr<RawResponse> RawRequest(int port, const std::string& method, const std::string& target,
                                 const std::string& body = "",
                                 std::chrono::milliseconds timeout = std::chrono::seconds(2),
                                 const std::string& source = "127.0.0.1");

// Clients that hold a server's connections: `connections` sockets, from
// `sources` in turn, each sending a request line and then one header line
// every `lineInterval`, never ending the head; with lineInterval 0 they send
// nothing at all (idle). A socket the server closes is opened again, so the
// pressure lasts until Stop. One thread runs them all.
class SlowClients {
 public:
  struct Options {
    int port = 0;
    int connections = 1;
    std::vector<std::string> sources = {"127.0.0.1"};
    std::chrono::milliseconds lineInterval{0};
    std::string target = "/";
  };
  explicit SlowClients(Options options);
  ~SlowClients();  // Stop()
  void Stop();
  int open() const { return open_; }
  int reopened() const { return reopened_; }  // connections the server cut and we opened again

 private:
  void Run();

  const Options options_;
  std::atomic<bool> stop_{false};
  std::atomic<int> open_{0};
  std::atomic<int> reopened_{0};
  std::thread thread_;
};

}  // namespace easyscale::testing
