// File: easyscale/common/subprocess.h
//
// Child processes: start a program with arguments and an environment, send its
// stdout and stderr to a file, to a pipe the parent reads, or to the parent's
// own; signal it, poll or wait for its end, and kill and reap it when the
// handle goes away. Exit codes read like a shell's: the exit status, or 128 +
// the signal that ended the process.
//
//   // Run to the end and read what it printed:
//   StatusOr<CommandResult> r = RunCommand(
//       {.argv = {"helm", "version"}, .stdoutTo = Output::Pipe(), .stderrTo = Output::Pipe()},
//       std::chrono::seconds(30));
//
//   // A worker that dies with its parent and whose progress lines are read:
//   StatusOr<Subprocess> w = Subprocess::Start(
//       {.argv = {bin, "run"}, .stdoutTo = Output::Pipe(), .parentDeathSignal = SIGKILL});
//   while (std::optional<std::string> line = w->ReadLine(std::chrono::milliseconds(50))) ...
//   w->WaitOrKill(std::chrono::seconds(5));  // SIGTERM, up to 5 s, then SIGKILL
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale {

// Where a child's stdout or stderr goes.
struct Output {
  enum class Kind { kInherit, kFile, kPipe, kStdout };
  Kind kind = Kind::kInherit;
  std::string path;     // kFile
  bool append = false;  // kFile: append instead of truncating

  static Output Inherit() { return {}; }
  static Output File(std::string path, bool append = false) {
    return {Kind::kFile, std::move(path), append};
  }
  // The parent reads it: Subprocess::ReadLine, RunCommand.
  static Output Pipe() { return {Kind::kPipe}; }
  // For stderr: wherever stdout goes (2>&1).
  static Output SameAsStdout() { return {Kind::kStdout}; }
};

struct SubprocessOptions {
  // argv[0] names the program: a path, or a name looked up on the parent's PATH.
  std::vector<std::string> argv;
  // Added to the parent's environment (replacing equal names), or, with
  // inheritEnv = false, the child's whole environment.
  std::map<std::string, std::string> env;
  bool inheritEnv = true;
  Output stdoutTo;
  Output stderrTo;
  // Descriptors the child keeps across exec although they are close-on-exec.
  std::vector<int> keepFds;
  // Sent to the child when its parent goes away (PR_SET_PDEATHSIG); 0 = none.
  // The kernel ties it to the *thread* that started the child: start from a
  // thread that outlives it.
  int parentDeathSignal = 0;
  // Runs in the child between fork and exec, e.g. to enter namespaces. It may
  // only make async-signal-safe calls (no allocation, no locks, no logging):
  // prepare everything it needs before Start. Returns 0, or an errno value
  // that makes Start fail.
  std::function<int()> beforeExec;
  // A child still running when its handle is destroyed is stopped with
  // WaitOrKill(stopGrace); zero: killed at once.
  std::chrono::milliseconds stopGrace{0};
};

struct CommandResult {
  int exitCode = -1;
  std::string out;  // a piped stdout
  std::string err;  // a piped stderr
};

class Subprocess {
 public:
  // Fails, naming the program, when it cannot be found or started, an output
  // file cannot be opened, or beforeExec fails.
  static StatusOr<Subprocess> Start(SubprocessOptions options);

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  const std::string& program() const { return program_; }

  // Sends `signal` unless the child has already been reaped.
  void Signal(int signal);
  // The exit code once it has ended (reaping it); nullopt while it runs.
  std::optional<int> Poll();
  // Polls until it ends or `timeout` passes.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, up to `grace` for the end, then SIGKILL; returns the exit code.
  int WaitOrKill(std::chrono::milliseconds grace);
  // "running", "exit code 3" or "killed by signal 9 (Killed)".
  std::string Describe() const;

  // The next line of a piped stdout (without '\n'; a last line without one
  // comes at the end), or nullopt when none comes within `timeout` or the
  // output has ended (stdoutEnded()). A piped stderr is read alongside into
  // stderrText(), so neither pipe fills up.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);
  bool stdoutEnded() const { return out_.fd < 0; }
  const std::string& stderrText() const { return err_.buffer; }

 private:
  friend StatusOr<CommandResult> RunCommand(SubprocessOptions, std::chrono::milliseconds);
  struct Pipe {
    int fd = -1;
    std::string buffer;
  };
  Subprocess() = default;
  // Reads whatever the open pipes hold; false when nothing came before `deadline`.
  bool ReadPipes(std::chrono::steady_clock::time_point deadline);
  void Release();

  pid_t pid_ = -1;
  std::string program_;
  std::chrono::milliseconds stopGrace_{0};
  int waitStatus_ = 0;
  bool reaped_ = false;
  Pipe out_;
  Pipe err_;
};

// Starts `options`, reads its piped outputs to their end and waits for the
// exit. A command still running after `timeout` is killed: DeadlineExceeded.
StatusOr<CommandResult> RunCommand(SubprocessOptions options, std::chrono::milliseconds timeout);

}  // namespace easyscale
