// The HTTP server over real sockets on 127.0.0.1: routing, keep-alive, errors,
// and clients that are slow, idle, many, or over their limits. Distinct
// loopback source addresses (127.0.0.2, ...) play distinct clients.
#include "easyscale/common/http_server.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "testing/raw_http_client.h"

namespace easyscale {
namespace {

using namespace std::chrono_literals;
using testing::RawConnection;
using testing::RawRequest;
using testing::RawResponse;
using testing::SlowClients;
using Clock = std::chrono::steady_clock;

std::string Get(const std::string& target, const std::string& extraHeaders = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: t\r\n" + extraHeaders + "\r\n";
}

std::unique_ptr<HttpServer> StartServer(HttpServerOptions options = {}) {
  HttpRoutes routes;
  routes.Handle("GET", "/hello", [](const HttpRequest&) { return HttpResponse{.body = "hello"}; });
  routes.Handle("POST", "/echo", [](const HttpRequest& r) {
    return HttpResponse{.contentType = "application/json", .body = r.body};
  });
  routes.Handle("GET", "/whoami", [](const HttpRequest& r) {
    return HttpResponse{.body = r.Query("a") + "|" + r.Header("x-test") + "|" + r.remoteAddress};
  });
  routes.Handle("GET", "/throw", [](const HttpRequest&) -> HttpResponse {
    throw std::runtime_error("handler bug");
  });
  routes.Handle("GET", "/empty", [](const HttpRequest&) { return HttpResponse{.status = 204}; });
  options.name = "test";
  options.address = "127.0.0.1:0";
  StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(options, std::move(routes));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

std::unique_ptr<RawConnection> Open(int port, const std::string& source = "127.0.0.1") {
  StatusOr<std::unique_ptr<RawConnection>> c = RawConnection::Open(port, source);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

int StatusOf(const StatusOr<RawResponse>& r) { return r.ok() ? r->status : 0; }

int ThreadsOfThisProcess() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    int n = 0;
    if (line.rfind("Threads:", 0) == 0 && absl::SimpleAtoi(line.substr(8), &n)) return n;
  }
  return -1;
}

TEST(HttpServer, RoutesExactPathsWith404And405AndDecodesTheQuery) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  StatusOr<RawResponse> r = RawRequest(server->port(), "GET", "/hello");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->headers["content-length"], "5");
  EXPECT_EQ(r->headers["content-type"], "text/plain");
  EXPECT_EQ(StatusOf(RawRequest(server->port(), "GET", "/hello/")), 404);
  r = RawRequest(server->port(), "POST", "/hello");
  EXPECT_EQ(StatusOf(r), 405);
  EXPECT_EQ(r->headers["allow"], "GET");
  r = RawRequest(server->port(), "POST", "/echo", R"({"a":1})");
  EXPECT_EQ(r->body, R"({"a":1})");
  EXPECT_EQ(r->headers["content-type"], "application/json");
  r = RawRequest(server->port(), "GET", "/empty");
  EXPECT_EQ(StatusOf(r), 204);
  EXPECT_EQ(r->headers.count("content-length"), 0u);  // none on a 204

  auto c = Open(server->port(), "127.0.0.7");
  ASSERT_TRUE(c->Send(Get("/whoami?b=1&a=ns%2Fj+x&a=second", "X-Test: v\r\n")));
  r = c->Read(2s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "ns/j x|v|127.0.0.7");
}

TEST(HttpServer, KeepsConnectionsAliveAndAnswersPipelinedRequestsInOrder) {
  auto server = StartServer();
  auto c = Open(server->port());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c->Send(Get("/hello")));
    EXPECT_EQ(StatusOf(c->Read(2s)), 200) << i;
  }
  ASSERT_TRUE(c->Send(Get("/hello") + Get("/nope") + Get("/hello", "Connection: close\r\n")));
  EXPECT_EQ(StatusOf(c->Read(2s)), 200);
  EXPECT_EQ(StatusOf(c->Read(2s)), 404);
  EXPECT_EQ(StatusOf(c->Read(2s)), 200);
  EXPECT_TRUE(c->ClosedByServer(2s));  // as the last request asked
}

TEST(HttpServer, ClosesAKeptAliveConnectionAfterTheIdleTimeout) {
  auto server = StartServer({.idleTimeout = 300ms});
  auto c = Open(server->port());
  ASSERT_TRUE(c->Send(Get("/hello")));
  ASSERT_EQ(StatusOf(c->Read(2s)), 200);
  const auto start = Clock::now();
  EXPECT_TRUE(c->ClosedByServer(3s));
  EXPECT_GE(Clock::now() - start, 250ms);
}

TEST(HttpServer, AThrowingHandlerGets500AndTheServerLivesOn) {
  auto server = StartServer();
  auto c = Open(server->port());
  ASSERT_TRUE(c->Send(Get("/throw")));
  StatusOr<RawResponse> r = c->Read(2s);
  EXPECT_EQ(StatusOf(r), 500);
  EXPECT_EQ(r->body.find("handler bug"), std::string::npos);  // no internals to clients
  ASSERT_TRUE(c->Send(Get("/hello")));                        // same connection
  EXPECT_EQ(StatusOf(c->Read(2s)), 200);
  EXPECT_EQ(StatusOf(RawRequest(server->port(), "GET", "/hello")), 200);
}

TEST(HttpServer, MalformedRequestsGet400AndOversizedHeads431) {
  auto server = StartServer({.maxHeaderBytes = 1024});
  for (const std::string& bad :
       {std::string("GARBAGE\r\n\r\n"), std::string("GET /hello HTTP/1.1\r\nNo colon\r\n\r\n"),
        std::string("GET /hello HTTP/9.x\r\n\r\n"),
        std::string("POST /echo HTTP/1.1\r\nContent-Length: many\r\n\r\n")}) {
    auto c = Open(server->port());
    ASSERT_TRUE(c->Send(bad));
    EXPECT_EQ(StatusOf(c->Read(2s)), 400) << bad;
    EXPECT_TRUE(c->ClosedByServer(2s)) << bad;
  }
  auto c = Open(server->port());
  ASSERT_TRUE(c->Send(Get("/hello", "X-Big: " + std::string(2000, 'x') + "\r\n")));
  EXPECT_EQ(StatusOf(c->Read(2s)), 431);
}

TEST(HttpServer, BodiesOverTheLimitGet413BeforeTheyAreRead) {
  auto server = StartServer({.maxBodyBytes = 1000});
  auto c = Open(server->port());
  // Only the head is sent: the answer must not wait for the body.
  ASSERT_TRUE(c->Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n"));
  EXPECT_EQ(StatusOf(c->Read(2s)), 413);
  c = Open(server->port());
  ASSERT_TRUE(
      c->Send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
              "200\r\n" +
              std::string(512, 'a') + "\r\n200\r\n" + std::string(512, 'b') + "\r\n"));
  EXPECT_EQ(StatusOf(c->Read(2s)), 413);
  const std::string fits(1000, 'c');
  StatusOr<RawResponse> r = RawRequest(server->port(), "POST", "/echo", fits);
  EXPECT_EQ(StatusOf(r), 200);
  EXPECT_EQ(r->body, fits);
}

// Slowloris: heads that trickle in, a line at a time, are cut at the head
// deadline (the whole head, not each read), while other clients are served at once.
TEST(HttpServer, SlowHeadsAreCutAtTheHeadDeadlineWhileOthersAreServed) {
  auto server = StartServer({.headerTimeout = 1s});
  SlowClients slow({.port = server->port(),
                    .connections = 50,
                    .sources = {"127.0.0.2"},
                    .lineInterval = 100ms,
                    .target = "/hello"});
  auto watched = Open(server->port(), "127.0.0.3");
  const auto opened = Clock::now();
  ASSERT_TRUE(watched->Send("GET /hello HTTP/1.1\r\n"));
  std::chrono::milliseconds slowest{0};
  while (Clock::now() - opened < 1500ms) {
    const auto t0 = Clock::now();
    ASSERT_EQ(StatusOf(RawRequest(server->port(), "GET", "/hello")), 200);
    slowest =
        std::max(slowest, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0));
    watched->Send("X-Drip: y\r\n");  // fails once the server has closed it
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_LT(slowest, 100ms);
  // The watched head got 408 at about 1 s; the slow clients were cut and reopened.
  StatusOr<RawResponse> cut = watched->Read(1s);
  EXPECT_EQ(StatusOf(cut), 408) << cut.status();
  EXPECT_TRUE(watched->ClosedByServer(1s));
  EXPECT_GE(slow.reopened(), 50);
}

TEST(HttpServer, ConnectionsOverTheClientAndTotalLimitsAreClosedAtAccept) {
  auto server = StartServer({.maxConnections = 8, .maxConnectionsPerClient = 4});
  const int port = server->port();
  std::vector<std::unique_ptr<RawConnection>> a;
  for (int i = 0; i < 4; ++i) a.push_back(Open(port, "127.0.0.2"));
  for (auto& c : a) EXPECT_FALSE(c->ClosedByServer(100ms));  // held: within the limit
  auto fifth = Open(port, "127.0.0.2");
  EXPECT_TRUE(fifth->ClosedByServer(1s));
  auto other = Open(port, "127.0.0.3");
  ASSERT_TRUE(other->Send(Get("/hello", "Connection: close\r\n")));
  EXPECT_EQ(StatusOf(other->Read(2s)), 200);
  EXPECT_TRUE(other->ClosedByServer(2s));  // and its slot is free again

  std::vector<std::unique_ptr<RawConnection>> b;
  for (int i = 0; i < 4; ++i) b.push_back(Open(port, "127.0.0.3"));
  for (auto& c : b) EXPECT_FALSE(c->ClosedByServer(100ms));
  // Eight open: a third client is refused too.
  EXPECT_FALSE(RawRequest(port, "GET", "/hello", "", 1s, "127.0.0.4").ok());
  // Slots come back when clients leave.
  a.clear();
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    served = StatusOf(RawRequest(port, "GET", "/hello", "", 1s, "127.0.0.4")) == 200;
    if (!served) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(served);
}

TEST(HttpServer, TwoHundredIdleSocketsTakeNoThreadsAndDelayNothing) {
  const int threadsBefore = ThreadsOfThisProcess();
  auto server = StartServer({.ioThreads = 2});
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 200; ++i)
    idle.push_back(Open(server->port(), "127.0.1." + std::to_string(i % 50 + 1)));
  std::this_thread::sleep_for(100ms);  // all accepted
  EXPECT_LE(ThreadsOfThisProcess(), threadsBefore + 2);
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    EXPECT_EQ(StatusOf(RawRequest(server->port(), "GET", "/hello")), 200);
    EXPECT_LT(Clock::now() - t0, 100ms) << i;
  }
  for (auto& c : idle) EXPECT_FALSE(c->ClosedByServer(0ms));  // still held
}

TEST(HttpServer, ConcurrentRequestsFromManyThreadsAreAllAnswered) {
  auto server = StartServer();
  constexpr int kThreads = 16;
  constexpr int kRequests = 50;
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto c = RawConnection::Open(server->port());
      if (!c.ok()) return;
      for (int i = 0; i < kRequests; ++i) {
        const std::string body = std::to_string(t) + "-" + std::to_string(i);
        (*c)->Send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body);
        StatusOr<RawResponse> r = (*c)->Read(5s);
        if (r.ok() && r->status == 200 && r->body == body) ++answered;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(answered, kThreads * kRequests);
}

TEST(HttpServer, StopClosesConnectionsAndIsSafeTwice) {
  auto server = StartServer();
  auto c = Open(server->port());
  ASSERT_TRUE(c->Send(Get("/hello")));
  ASSERT_EQ(StatusOf(c->Read(2s)), 200);
  server->Stop();
  EXPECT_TRUE(c->ClosedByServer(1s));
  server->Stop();
  EXPECT_FALSE(RawConnection::Open(server->port()).ok());  // nothing listens
}

TEST(HttpServer, StartErrorsNameTheServer) {
  auto first = StartServer();
  StatusOr<std::unique_ptr<HttpServer>> second = HttpServer::Start(
      {.name = "control", .address = "127.0.0.1:" + std::to_string(first->port())}, {});
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  EXPECT_NE(second.status().message().find("control server: cannot listen on 127.0.0.1:"),
            std::string::npos)
      << second.status();
  EXPECT_FALSE(HttpServer::Start({.name = "x", .address = ":0", .ioThreads = 0}, {}).ok());
  EXPECT_FALSE(HttpServer::Start({.name = "x", .address = "nonsense"}, {}).ok());
}

TEST(ParseListenAddress, SplitsHostAndPortAndNamesTheFlagInErrors) {
  StatusOr<ListenAddress> a = ParseListenAddress("--health-addr", ":8081");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "0.0.0.0");
  EXPECT_EQ(a->port, 8081);
  a = ParseListenAddress("--health-addr", "[::1]:0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 0);
  for (const char* bad : {"8081", "host:", "host:65536", "host:-1", "host:x"}) {
    a = ParseListenAddress("--health-addr", bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().message().rfind("--health-addr: want host:port", 0), 0u) << a.status();
  }
}

}  // namespace
}  // namespace easyscale
