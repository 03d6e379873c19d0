// File: tests/operator/child_process.h
//
// A child process for multi-process tests: fork/exec with extra environment,
// stdout+stderr to a log file; killed (SIGKILL) and reaped on destruction.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace easyscale::op::testing {

class ChildProcess {
 public:
  ChildProcess(const std::string& binary, const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env, const std::string& logPath);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Exit code (or 128 + signal) once it has ended; nullopt while running.
  std::optional<int> Poll();
  // Waits up to `ms` for the end; kills with SIGKILL after that.
  int WaitOrKill(int ms);
  const std::string& logPath() const { return logPath_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> code_;
  std::string logPath_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

}  // namespace easyscale::op::testing
