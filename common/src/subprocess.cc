// fork/exec/wait for every part and test harness.
#include "easyscale/common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "easyscale/common/checks.h"

extern char** environ;

namespace easyscale {
namespace {

using Clock = std::chrono::steady_clock;

// What the child reports through the error pipe when it cannot exec.
struct ChildFailure {
  enum Stage : int { kSetup, kBeforeExec, kExec } stage;
  int error;
};

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// A path for argv[0]: as given when it has a '/', else the first executable
// match on the parent's PATH.
StatusOr<std::string> ResolveProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return absl::NotFoundError("start " + name + ": not found on PATH");
}

std::vector<std::string> ChildEnvironment(const SubprocessOptions& o) {
  std::vector<std::string> env;
  if (o.inheritEnv) {
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (o.env.count(entry.substr(0, entry.find('='))) == 0) env.push_back(entry);
    }
  }
  for (const auto& [name, value] : o.env) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The descriptor a kFile output writes to.
StatusOr<int> OpenOutputFile(const Output& o, const std::string& program) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (o.append ? O_APPEND : O_TRUNC);
  const int fd = ::open(o.path.c_str(), flags, 0644);
  if (fd < 0) {
    return absl::InternalError("start " + program + ": open " + o.path + ": " +
                               std::strerror(errno));
  }
  return fd;
}

// The parent's and the child's ends of one output.
struct OutputEnds {
  int parent = -1;  // read end of a pipe
  int child = -1;   // what the child dup2s; -1 = inherit
  ~OutputEnds() {
    CloseFd(parent);
    CloseFd(child);
  }
};

Status OpenOutput(const Output& o, const std::string& program, OutputEnds* ends) {
  if (o.kind == Output::Kind::kFile) {
    ES_ASSIGN_OR_RETURN(ends->child, OpenOutputFile(o, program));
  } else if (o.kind == Output::Kind::kPipe) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      return absl::InternalError("start " + program + ": pipe: " + std::strerror(errno));
    }
    ends->parent = fds[0];
    ends->child = fds[1];
  }
  return absl::OkStatus();
}

[[noreturn]] void ChildFail(int report_fd, ChildFailure::Stage stage, int error) {
  const ChildFailure f{stage, error};
  (void)!::write(report_fd, &f, sizeof f);
  ::_exit(127);
}

// From fork to exec: async-signal-safe calls only.
[[noreturn]] void RunChild(const SubprocessOptions& o, const char* path, char* const* argv,
                           char* const* envp, int out_fd, int err_fd, pid_t parent, int report_fd) {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) ::sigaction(s, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (out_fd >= 0 && ::dup2(out_fd, STDOUT_FILENO) < 0) {
    ChildFail(report_fd, ChildFailure::kSetup, errno);
  }
  if (o.stderrTo.kind == Output::Kind::kStdout) err_fd = STDOUT_FILENO;
  if (err_fd >= 0 && ::dup2(err_fd, STDERR_FILENO) < 0) {
    ChildFail(report_fd, ChildFailure::kSetup, errno);
  }
  for (int fd : o.keepFds) {
    if (::fcntl(fd, F_SETFD, 0) != 0) ChildFail(report_fd, ChildFailure::kSetup, errno);
  }
  if (o.parentDeathSignal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, o.parentDeathSignal) != 0) {
      ChildFail(report_fd, ChildFailure::kSetup, errno);
    }
    // The parent may have ended before prctl took effect: then nobody sends it.
    if (::getppid() != parent) ::raise(o.parentDeathSignal);
  }
  if (o.beforeExec) {
    if (const int error = o.beforeExec(); error != 0) {
      ChildFail(report_fd, ChildFailure::kBeforeExec, error);
    }
  }
  ::execve(path, argv, envp);
  ChildFail(report_fd, ChildFailure::kExec, errno);
}

int ExitCode(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

}  // namespace

StatusOr<Subprocess> Subprocess::Start(SubprocessOptions options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("start: no program given");
  const std::string program = options.argv[0];
  ES_ASSIGN_OR_RETURN(const std::string path, ResolveProgram(program));
  // Everything the child touches is allocated here, before fork.
  std::vector<std::string> args = options.argv;
  std::vector<std::string> env = ChildEnvironment(options);
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(env);
  OutputEnds out, err;
  ES_RETURN_IF_ERROR(OpenOutput(options.stdoutTo, program, &out));
  ES_RETURN_IF_ERROR(OpenOutput(options.stderrTo, program, &err));
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    return absl::InternalError("start " + program + ": pipe: " + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    RunChild(options, path.c_str(), argv.data(), envp.data(), out.child, err.child, parent,
             report[1]);
  }
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    return absl::ResourceExhaustedError("start " + program + ": fork: " + std::strerror(errno));
  }
  ChildFailure failure{};
  ssize_t n;
  while ((n = ::read(report[0], &failure, sizeof failure)) < 0 && errno == EINTR) {
  }
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof failure)) {  // exec did not happen
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    const char* stage = failure.stage == ChildFailure::kExec         ? "exec"
                        : failure.stage == ChildFailure::kBeforeExec ? "before exec"
                                                                     : "child setup";
    const std::string msg = "start " + program + ": " + stage + ": " + std::strerror(failure.error);
    if (failure.error == ENOENT) return absl::NotFoundError(msg);
    if (failure.error == EACCES || failure.error == EPERM) {
      return absl::PermissionDeniedError(msg);
    }
    return absl::InternalError(msg);
  }
  Subprocess p;
  p.pid_ = pid;
  p.program_ = program;
  p.stopGrace_ = options.stopGrace;
  std::swap(p.out_.fd, out.parent);
  std::swap(p.err_.fd, err.parent);
  return p;
}

Subprocess::Subprocess(Subprocess&& other) noexcept { *this = std::move(other); }

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this == &other) return *this;
  Release();
  pid_ = std::exchange(other.pid_, -1);
  program_ = std::move(other.program_);
  stopGrace_ = other.stopGrace_;
  waitStatus_ = other.waitStatus_;
  reaped_ = other.reaped_;
  out_.fd = std::exchange(other.out_.fd, -1);
  out_.buffer = std::move(other.out_.buffer);
  err_.fd = std::exchange(other.err_.fd, -1);
  err_.buffer = std::move(other.err_.buffer);
  return *this;
}

Subprocess::~Subprocess() { Release(); }

void Subprocess::Release() {
  if (pid_ > 0 && !Poll().has_value()) WaitOrKill(stopGrace_);
  CloseFd(out_.fd);
  CloseFd(err_.fd);
  pid_ = -1;
}

void Subprocess::Signal(int signal) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, signal);
}

std::optional<int> Subprocess::Poll() {
  if (pid_ <= 0) return std::nullopt;
  if (!reaped_) {
    int status = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &status, WNOHANG)) < 0 && errno == EINTR) {
    }
    if (r != pid_) return std::nullopt;
    waitStatus_ = status;
    reaped_ = true;
  }
  return ExitCode(waitStatus_);
}

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (std::optional<int> code = Poll()) return code;
    const auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(pause, deadline - now));  // exits are rarely instant
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

int Subprocess::WaitOrKill(std::chrono::milliseconds grace) {
  Signal(SIGTERM);
  if (std::optional<int> code = Wait(grace)) return *code;
  Signal(SIGKILL);
  for (;;) {
    if (std::optional<int> code = Wait(std::chrono::seconds(1))) return *code;
  }
}

std::string Subprocess::Describe() const {
  if (!reaped_) return "running";
  if (WIFEXITED(waitStatus_)) return "exit code " + std::to_string(WEXITSTATUS(waitStatus_));
  const int sig = WTERMSIG(waitStatus_);
  return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
}

bool Subprocess::ReadPipes(Clock::time_point deadline) {
  pollfd fds[2];
  Pipe* pipes[2];
  nfds_t n = 0;
  for (Pipe* p : {&out_, &err_}) {
    if (p->fd < 0) continue;
    fds[n] = {p->fd, POLLIN, 0};
    pipes[n++] = p;
  }
  if (n == 0) return false;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  const int ready = ::poll(fds, n, static_cast<int>(std::max<int64_t>(left.count(), 0)));
  if (ready <= 0) return false;
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].revents == 0) continue;
    char chunk[4096];
    const ssize_t got = ::read(pipes[i]->fd, chunk, sizeof chunk);
    if (got > 0) {
      pipes[i]->buffer.append(chunk, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      CloseFd(pipes[i]->fd);
    }
  }
  return true;
}

std::optional<std::string> Subprocess::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (const size_t nl = out_.buffer.find('\n'); nl != std::string::npos) {
      std::string line = out_.buffer.substr(0, nl);
      out_.buffer.erase(0, nl + 1);
      return line;
    }
    if (out_.fd < 0) {
      if (out_.buffer.empty()) return std::nullopt;
      return std::exchange(out_.buffer, std::string());
    }
    if (!ReadPipes(deadline)) return std::nullopt;
  }
}

StatusOr<CommandResult> RunCommand(SubprocessOptions options, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  ES_ASSIGN_OR_RETURN(Subprocess p, Subprocess::Start(std::move(options)));
  while ((p.out_.fd >= 0 || p.err_.fd >= 0) && p.ReadPipes(deadline)) {
  }
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  std::optional<int> code = p.Wait(std::max(left, std::chrono::milliseconds(0)));
  if (!code.has_value()) {
    return absl::DeadlineExceededError(
        absl::StrCat(p.program(), " did not finish within ", timeout.count(), " ms; killed"));
  }
  return CommandResult{*code, std::move(p.out_.buffer), std::move(p.err_.buffer)};
}

}  // namespace easyscale
