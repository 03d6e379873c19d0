// fork/exec/waitpid for tests.
#include "child_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace easyscale::op::testing {

ChildProcess::ChildProcess(const std::string& binary, const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& env,
                           const std::string& logPath)
    : logPath_(logPath) {
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = fork();
  if (pid_ != 0) return;
  // Child: only async-signal-safe calls until exec.
  const int fd = open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  execv(binary.c_str(), raw.data());
  _exit(127);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !Poll().has_value()) WaitOrKill(0);
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0 && !code_.has_value()) kill(pid_, sig);
}

std::optional<int> ChildProcess::Poll() {
  if (code_.has_value() || pid_ <= 0) return code_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return code_;
}

int ChildProcess::WaitOrKill(int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!Poll().has_value() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!Poll().has_value()) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    code_ = 128 + SIGKILL;
  }
  return *code_;
}

int FreePort() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  close(s);
  return ntohs(addr.sin_port);
}

}  // namespace easyscale::op::testing
