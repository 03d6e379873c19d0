// Blocking sockets with poll() deadlines, and the slow clients' loop.
#include "testing/raw_http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace easyscale::testing {

namespace {

using Clock = std::chrono::steady_clock;

int MillisUntil(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(left.count(), 0));
}

Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

StatusOr<std::unique_ptr<RawConnection>> RawConnection::Open(int port, const std::string& source) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  auto c = std::unique_ptr<RawConnection>(new RawConnection(fd));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  if (inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1) {
    return absl::InvalidArgumentError("not an IPv4 address: " + source);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) return Errno("bind");
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) return Errno("connect");
  return c;
}

RawConnection::~RawConnection() { close(fd_); }

bool RawConnection::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool RawConnection::ReadMore(Clock::time_point deadline) {
  pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
  const int ready = poll(&p, 1, MillisUntil(deadline));
  if (ready <= 0) return false;
  char chunk[16384];
  const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
  if (n <= 0) return false;
  received_.append(chunk, static_cast<size_t>(n));
  return true;
}

StatusOr<RawResponse> RawConnection::Read(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  size_t headEnd;
  while ((headEnd = received_.find("\r\n\r\n")) == std::string::npos) {
    if (!ReadMore(deadline)) return absl::UnavailableError("no response head: closed or too slow");
  }
  RawResponse r;
  // absl's string_view here is its own type: split std::strings.
  const std::vector<std::string> lines = absl::StrSplit(received_.substr(0, headEnd), "\r\n");
  const std::vector<std::string> statusLine = absl::StrSplit(lines[0], ' ');
  if (statusLine.size() < 2 || !absl::SimpleAtoi(statusLine[1], &r.status)) {
    return absl::DataLossError("bad status line: " + lines[0]);
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    r.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  size_t length = 0;
  if (auto it = r.headers.find("content-length");
      it != r.headers.end() && !absl::SimpleAtoi(it->second, &length)) {
    return absl::DataLossError("bad Content-Length: " + it->second);
  }
  const size_t bodyStart = headEnd + 4;
  while (received_.size() < bodyStart + length) {
    if (!ReadMore(deadline)) return absl::UnavailableError("body cut short: closed or too slow");
  }
  r.body = received_.substr(bodyStart, length);
  received_.erase(0, bodyStart + length);
  return r;
}

bool RawConnection::ClosedByServer(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {  // polls at least once, also for a timeout of 0
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, MillisUntil(deadline)) <= 0) return false;
    char chunk[4096];
    if (recv(fd_, chunk, sizeof(chunk), 0) <= 0) return true;
  }
}

StatusOr<RawResponse> RawRequest(int port, const std::string& method, const std::string& target,
                                 const std::string& body, std::chrono::milliseconds timeout,
                                 const std::string& source) {
  StatusOr<std::unique_ptr<RawConnection>> c = RawConnection::Open(port, source);
  if (!c.ok()) return c.status();
  const std::string request =
      absl::StrCat(method, " ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n",
                   "Content-Length: ", body.size(), "\r\n\r\n", body);
  if (!(*c)->Send(request)) return Errno("send");
  return (*c)->Read(timeout);
}

SlowClients::SlowClients(Options options) : options_(std::move(options)) {
  thread_ = std::thread([this] { Run(); });
}

SlowClients::~SlowClients() { Stop(); }

void SlowClients::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void SlowClients::Run() {
  constexpr std::chrono::milliseconds kTick{20};
  std::vector<std::unique_ptr<RawConnection>> held(options_.connections);
  Clock::time_point nextLine = Clock::now() + options_.lineInterval;
  int lines = 0;
  while (!stop_) {
    const bool sendLine = options_.lineInterval.count() > 0 && Clock::now() >= nextLine;
    if (sendLine) {
      nextLine += options_.lineInterval;
      ++lines;
    }
    for (size_t i = 0; i < held.size(); ++i) {
      if (held[i] != nullptr && held[i]->ClosedByServer(std::chrono::milliseconds(0))) {
        held[i].reset();
        --open_;
        ++reopened_;
      }
      if (held[i] == nullptr) {
        const std::string& source = options_.sources[i % options_.sources.size()];
        StatusOr<std::unique_ptr<RawConnection>> c = RawConnection::Open(options_.port, source);
        if (!c.ok()) continue;  // try again next tick
        held[i] = std::move(*c);
        ++open_;
        if (options_.lineInterval.count() > 0) {
          held[i]->Send(absl::StrCat("GET ", options_.target, " HTTP/1.1\r\n"));
        }
      }
      if (sendLine) held[i]->Send(absl::StrCat("X-Slow-", lines, ": y\r\n"));
    }
    std::this_thread::sleep_for(kTick);
  }
  open_ = 0;
}

}  // namespace easyscale::testing
