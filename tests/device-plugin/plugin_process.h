// Runs the easyscale-device-plugin binary as a child process in a temp folder;
// SIGTERM, then SIGKILL after 5 s on destruction, and the folder removed.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "easyscale/common/subprocess.h"

namespace easyscale::dp::testing {

// A fresh folder under /tmp (short: Unix socket paths are limited to 107 bytes).
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  void Write(const std::string& name, const std::string& content) const;
  std::string Read(const std::string& name) const;  // "" when missing

 private:
  std::string path_;
};

class PluginProcess {
 public:
  // Starts the binary with `args`; stdout and stderr go to files in `dir`.
  PluginProcess(const std::string& dir, const std::vector<std::string>& args);

  // Waits for exit; the exit code, or -1 when it is still running at `timeout`.
  int Wait(std::chrono::milliseconds timeout);
  std::string Stdout() const;
  std::string Stderr() const;

 private:
  std::string dir_;
  std::optional<Subprocess> process_;
};

// Polls `done` every 20 ms until it is true or `timeout` passes.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout);

}  // namespace easyscale::dp::testing
