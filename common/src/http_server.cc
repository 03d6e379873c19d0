// The HTTP server on Boost.Beast and Boost.Asio. One acceptor; each accepted
// socket is a Connection: a chain of asynchronous steps (head, body, handler,
// write, wait for the next request) on its own strand, with one deadline
// timer that cancels whichever step outlives its phase's timeout.
#include "easyscale/common/http_server.h"

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"

namespace easyscale {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using WireRequest = http::request<http::string_body>;
using WireResponse = http::response<http::string_body>;

constexpr const char* kComponent = "http";

std::string_view Std(beast::string_view s) { return {s.data(), s.size()}; }

// At most one line per reason every kInterval; each line says how many were
// left out since the last, so a flood of bad clients cannot flood the log.
class RateLimitedLog {
 public:
  explicit RateLimitedLog(std::string server) : server_(std::move(server)) {}

  void operator()(LogLevel level, const std::string& reason, nlohmann::json fields) {
    if (static_cast<int>(level) < static_cast<int>(GetLogLevel())) return;
    const Clock::time_point now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      Window& w = windows_[reason];  // reasons are a handful of literals
      if (w.logged && now - w.last < kInterval) {
        ++w.suppressed;
        return;
      }
      fields["suppressed"] = w.suppressed;
      w = {.logged = true, .last = now, .suppressed = 0};
    }
    fields["server"] = server_;
    Log(level, kComponent, reason, fields);
  }

 private:
  static constexpr std::chrono::seconds kInterval{10};
  struct Window {
    bool logged = false;
    Clock::time_point last;
    uint64_t suppressed = 0;
  };
  const std::string server_;
  std::mutex mu_;
  std::map<std::string, Window> windows_;
};

// Open connections, in total and per client address.
class ConnectionLimits {
 public:
  ConnectionLimits(size_t total, size_t perClient) : total_(total), perClient_(perClient) {}

  // nullptr when admitted, else why not.
  const char* Admit(const std::string& client) {
    std::lock_guard<std::mutex> lock(mu_);
    if (open_ >= total_) return "connection refused: server at its connection limit";
    auto it = byClient_.find(client);
    if (it != byClient_.end() && it->second >= perClient_) {
      return "connection refused: client at its connection limit";
    }
    ++byClient_[client];
    ++open_;
    return nullptr;
  }

  void Release(const std::string& client) {
    std::lock_guard<std::mutex> lock(mu_);
    --open_;
    auto it = byClient_.find(client);
    if (--it->second == 0) byClient_.erase(it);
  }

 private:
  const size_t total_;
  const size_t perClient_;
  std::mutex mu_;
  size_t open_ = 0;
  std::map<std::string, size_t> byClient_;
};

// What every connection reads; outlives them all.
struct Shared {
  Shared(HttpServerOptions o, HttpRoutes r)
      : options(std::move(o)),
        routes(std::move(r)),
        limits(options.maxConnections, options.maxConnectionsPerClient),
        log(options.name) {}

  const HttpServerOptions options;
  HttpRoutes routes;
  ConnectionLimits limits;
  RateLimitedLog log;
};

// '+' is a space and %XX a byte; a '%' without two hex digits stays as it is.
std::string DecodeQueryComponent(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    c = absl::ascii_tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

HttpRequest ToHttpRequest(WireRequest& wire, const std::string& client) {
  HttpRequest r;
  r.method = std::string(Std(wire.method_string()));
  const std::string_view target = Std(wire.target());
  const size_t question = target.find('?');
  r.path = std::string(target.substr(0, question));
  if (question != std::string_view::npos) {
    std::string_view query = target.substr(question + 1);
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      if (pair.empty()) continue;
      const size_t eq = pair.find('=');
      r.query.emplace(
          DecodeQueryComponent(pair.substr(0, eq)),
          eq == std::string_view::npos ? "" : DecodeQueryComponent(pair.substr(eq + 1)));
    }
  }
  for (const auto& field : wire) {
    auto [it, inserted] =
        r.headers.emplace(absl::AsciiStrToLower(std::string(Std(field.name_string()))),
                          std::string(Std(field.value())));
    if (!inserted) absl::StrAppend(&it->second, ", ", std::string(Std(field.value())));
  }
  r.body = std::move(wire.body());
  r.remoteAddress = client;
  return r;
}

// Throws for a status outside 200..599 or a body on 204/304.
WireResponse ToWireResponse(HttpResponse r, unsigned version, bool keepAlive) {
  ES_CHECK(r.status >= 200 && r.status <= 599) << "HTTP status " << r.status;
  WireResponse out;
  out.version(version);
  out.result(static_cast<unsigned>(r.status));
  for (auto& [name, value] : r.headers) out.set(name, value);
  out.keep_alive(keepAlive);
  if (r.status == 204 || r.status == 304) {  // no Content-Length allowed
    ES_CHECK(r.body.empty()) << "a body on HTTP status " << r.status;
    return out;
  }
  if (!r.body.empty()) out.set(http::field::content_type, r.contentType);
  out.body() = std::move(r.body);
  out.prepare_payload();  // Content-Length
  return out;
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::string client, Shared* shared)
      : socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        client_(std::move(client)),
        shared_(shared) {}
  ~Connection() { ReleaseSlot(); }

  void Start() { ReadHead(); }

 private:
  enum class Phase { kHead, kBody, kWrite, kIdle };

  const HttpServerOptions& options() const { return shared_->options; }

  // Cancels the socket's pending operation when `timeout` passes in `phase`.
  void Arm(Phase phase, std::chrono::milliseconds timeout) {
    phase_ = phase;
    expired_ = false;
    const uint64_t serial = ++deadlineSerial_;
    deadline_.expires_after(timeout);
    deadline_.async_wait([self = shared_from_this(), serial](beast::error_code ec) {
      // A wait that completed before it was re-armed is stale.
      if (ec || serial != self->deadlineSerial_) return;
      self->expired_ = true;
      self->socket_.cancel(ec);
    });
  }

  void ReadHead() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(
        std::min<size_t>(options().maxHeaderBytes, std::numeric_limits<uint32_t>::max())));
    parser_->body_limit(options().maxBodyBytes);
    Arm(Phase::kHead, options().headerTimeout);
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->ReadFailed(ec);
                              if (self->parser_->is_done()) return self->Dispatch();
                              self->ReadBody();
                            });
  }

  void ReadBody() {
    Arm(Phase::kBody, options().bodyTimeout);
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->ReadFailed(ec);
                       self->Dispatch();
                     });
  }

  void ReadFailed(beast::error_code ec) {
    if (expired_) {
      return Reject(408,
                    phase_ == Phase::kHead ? "request head timed out" : "request body timed out");
    }
    if (ec == http::error::header_limit) return Reject(431, "request head too large");
    if (ec == http::error::body_limit) return Reject(413, "request body too large");
    // The client closing the connection, at a request boundary or inside one, is
    // no protocol error; every other parser error is.
    if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return Reject(400, "malformed request");
    }
    Close();
  }

  void Dispatch() {
    WireRequest& wire = parser_->get();
    const unsigned version = wire.version();
    const bool keepAlive = wire.keep_alive();
    std::string failure;
    try {
      response_ =
          ToWireResponse(shared_->routes.Serve(ToHttpRequest(wire, client_)), version, keepAlive);
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "an exception that is not a std::exception";
    }
    if (!failure.empty()) {
      shared_->log(LogLevel::kError, "handler failed; answered 500",
                   {{"client", client_}, {"path", Std(wire.target())}, {"error", failure}});
      response_ = ToWireResponse({.status = 500, .body = "internal error\n"}, version, keepAlive);
    }
    Write();
  }

  // Answers `status` and closes: the rest of the request is not read.
  void Reject(int status, const char* reason) {
    shared_->log(LogLevel::kDebug, reason, {{"client", client_}, {"status", status}});
    response_ = ToWireResponse({.status = status, .body = std::string(reason) + "\n"}, 11,
                               /*keepAlive=*/false);
    Write();
  }

  void Write() {
    Arm(Phase::kWrite, options().writeTimeout);
    http::async_write(socket_, response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) {
                          if (self->expired_) {
                            self->shared_->log(LogLevel::kDebug, "response write timed out",
                                               {{"client", self->client_}});
                          }
                          return self->Close();
                        }
                        if (!self->response_.keep_alive()) return self->Close();
                        self->WaitForNextRequest();
                      });
  }

  void WaitForNextRequest() {
    if (buffer_.size() > 0) return ReadHead();  // pipelined: already here
    Arm(Phase::kIdle, options().idleTimeout);
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->Close();  // idle too long
      self->ReadHead();
    });
  }

  void Close() {
    ReleaseSlot();  // first: a client that saw the close may connect again at once
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    socket_.close(ignored);
    deadline_.cancel();  // lets go of this connection now
  }

  void ReleaseSlot() {
    if (!holdsSlot_) return;
    holdsSlot_ = false;
    shared_->limits.Release(client_);
  }

  tcp::socket socket_;
  asio::steady_timer deadline_;
  uint64_t deadlineSerial_ = 0;
  bool expired_ = false;  // the deadline of phase_ passed
  Phase phase_ = Phase::kHead;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;  // one per request
  WireResponse response_;
  const std::string client_;
  Shared* const shared_;
  bool holdsSlot_ = true;  // admitted by shared_->limits
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(HttpServerOptions options, HttpRoutes routes)
      : shared_(std::move(options), std::move(routes)),
        io_(std::make_unique<asio::io_context>(shared_.options.ioThreads)),
        acceptor_(std::make_unique<tcp::acceptor>(*io_)),
        acceptRetry_(std::make_unique<asio::steady_timer>(*io_)) {}

  Status Listen(const ListenAddress& where) {
    const std::string what =
        absl::StrCat(shared_.options.name, " server: cannot listen on ", shared_.options.address);
    beast::error_code ec;
    tcp::endpoint endpoint(asio::ip::make_address(where.host, ec),
                           static_cast<unsigned short>(where.port));
    if (ec) {  // a host name
      tcp::resolver resolver(*io_);
      auto found = resolver.resolve(where.host, std::to_string(where.port), ec);
      if (ec || found.empty())
        return absl::InvalidArgumentError(absl::StrCat(what, ": ", ec.message()));
      endpoint = found.begin()->endpoint();
    }
    acceptor_->open(endpoint.protocol(), ec);
    if (!ec) acceptor_->set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_->bind(endpoint, ec);
    if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return absl::UnavailableError(absl::StrCat(what, ": ", ec.message()));
    port_ = acceptor_->local_endpoint().port();
    return absl::OkStatus();
  }

  void Run() {
    Accept();
    for (int i = 0; i < shared_.options.ioThreads; ++i) {
      threads_.emplace_back([this] {
        for (;;) {
          try {
            io_->run();
            return;
          } catch (const std::exception& e) {  // a bug in a completion handler: keep serving
            LogError(kComponent, "io thread caught an exception",
                     {{"server", shared_.options.name}, {"error", e.what()}});
          }
        }
      });
    }
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(stopMu_);
    if (!io_) return;
    io_->stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    acceptRetry_.reset();
    acceptor_.reset();
    io_.reset();  // destroys the pending operations, and with them every connection
  }

  int port() const { return port_; }

 private:
  void Accept() {
    acceptor_->async_accept(
        asio::make_strand(*io_), [this](beast::error_code ec, tcp::socket socket) {
          if (ec == asio::error::operation_aborted) return;
          if (ec) {  // out of file descriptors, say: try again soon instead of spinning
            shared_.log(LogLevel::kWarn, "accept failed", {{"error", ec.message()}});
            acceptRetry_->expires_after(std::chrono::milliseconds(50));
            acceptRetry_->async_wait([this](beast::error_code e) {
              if (!e) Accept();
            });
            return;
          }
          Admit(std::move(socket));
          Accept();
        });
  }

  void Admit(tcp::socket socket) {
    beast::error_code ec;
    asio::ip::address peer = socket.remote_endpoint(ec).address();
    if (ec) return;  // already gone
    if (peer.is_v6() && peer.to_v6().is_v4_mapped()) {
      peer = asio::ip::make_address_v4(asio::ip::v4_mapped, peer.to_v6());
    }
    std::string client = peer.to_string();
    if (const char* refused = shared_.limits.Admit(client)) {
      shared_.log(LogLevel::kWarn, refused, {{"client", client}});
      socket.close(ec);
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);
    std::make_shared<Connection>(std::move(socket), std::move(client), &shared_)->Start();
  }

  Shared shared_;  // before io_: connections use it until io_ is gone
  std::unique_ptr<asio::io_context> io_;
  std::unique_ptr<tcp::acceptor> acceptor_;
  std::unique_ptr<asio::steady_timer> acceptRetry_;
  std::vector<std::thread> threads_;
  std::mutex stopMu_;
  int port_ = 0;
};

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                        HttpRoutes routes) {
  ES_ASSIGN_OR_RETURN(ListenAddress where,
                      ParseListenAddress(options.name + " server address", options.address));
  using std::chrono::milliseconds;
  if (options.ioThreads < 1 || options.maxConnections < 1 || options.maxConnectionsPerClient < 1 ||
      options.maxHeaderBytes < 1 || options.headerTimeout <= milliseconds(0) ||
      options.bodyTimeout <= milliseconds(0) || options.idleTimeout <= milliseconds(0) ||
      options.writeTimeout <= milliseconds(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.name, " server: limits, timeouts and io threads must be positive"));
  }
  const std::string name = options.name;
  auto impl = std::make_unique<Impl>(std::move(options), std::move(routes));
  ES_RETURN_IF_ERROR(impl->Listen(where));
  impl->Run();
  LogInfo(kComponent, "listening",
          {{"server", name}, {"host", where.host}, {"port", impl->port()}});
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { Stop(); }
int HttpServer::port() const { return impl_->port(); }
void HttpServer::Stop() { impl_->Stop(); }

}  // namespace easyscale
