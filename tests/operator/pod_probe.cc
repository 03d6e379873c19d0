// A small program for the pods of the isolation tests:
//   pod_probe serve PORT              answers each connection with $POD_IP and a newline
//   pod_probe connect HOST PORT       exit 0 once HOST:PORT answers with HOST (tries for 10 s)
//   pod_probe unreachable HOST PORT   exit 0 when HOST:PORT takes no connection (2 s)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

sockaddr_in Address(const char* host, const char* port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    std::fprintf(stderr, "pod_probe: not an IPv4 address: %s\n", host);
    std::exit(2);
  }
  return a;
}

int Serve(const char* port) {
  const char* ip = std::getenv("POD_IP");
  const std::string answer = std::string(ip != nullptr ? ip : "") + "\n";
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in a = Address("0.0.0.0", port);
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(s, 16) != 0) {
    std::perror("pod_probe: listen");
    return 1;
  }
  for (;;) {
    const int c = accept(s, nullptr, nullptr);
    if (c < 0) continue;
    (void)!write(c, answer.data(), answer.size());
    close(c);
  }
}

// Connects within `timeout`; the socket, or -1.
int Connect(const sockaddr_in& a, std::chrono::milliseconds timeout) {
  const int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
    close(s);
    return -1;
  }
  pollfd p{s, POLLOUT, 0};
  int error = 0;
  socklen_t len = sizeof error;
  if (poll(&p, 1, static_cast<int>(timeout.count())) != 1 ||
      getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) {
    close(s);
    return -1;
  }
  fcntl(s, F_SETFL, 0);
  return s;
}

int ConnectAndCheck(const char* host, const char* port) {
  const sockaddr_in a = Address(host, port);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const int s = Connect(a, std::chrono::seconds(1));
    if (s < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    char buf[64] = {};
    const ssize_t n = read(s, buf, sizeof buf - 1);
    close(s);
    const std::string answer(buf, n > 0 ? static_cast<size_t>(n) : 0);
    std::printf("%s:%s answered %s", host, port, answer.c_str());
    return answer == std::string(host) + "\n" ? 0 : 1;
  }
  std::printf("%s:%s: no connection\n", host, port);
  return 1;
}

int Unreachable(const char* host, const char* port) {
  const int s = Connect(Address(host, port), std::chrono::seconds(2));
  if (s < 0) return 0;
  close(s);
  std::printf("%s:%s took a connection\n", host, port);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "serve" && argc == 3) return Serve(argv[2]);
  if (command == "connect" && argc == 4) return ConnectAndCheck(argv[2], argv[3]);
  if (command == "unreachable" && argc == 4) return Unreachable(argv[2], argv[3]);
  std::fprintf(stderr, "usage: pod_probe serve PORT | connect HOST PORT | unreachable HOST PORT\n");
  return 2;
}
