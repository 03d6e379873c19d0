// File: tests/worker/worker_cli.h
//
// Test-only: runs `easyscale-worker` (or `easyscale-test-worker`) and Python
// as a user would and reads
// what it prints; exports the example models once per test run.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace easyscale::clitest {

inline constexpr char kPython[] = "/usr/bin/python3";
inline const std::string kSource = EASYSCALE_SOURCE_DIR;

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr
  std::string digest;
  double accuracy = -1;
};

Outcome Command(std::vector<std::string> argv, int timeout_s = 600);
// easyscale-worker with the space-separated `args`, killed after
// `timeout_s` (a run that must not hang).
Outcome Worker(const std::string& args, int timeout_s = 600);
// The same with easyscale-test-worker, which also takes the flags that break
// a job on purpose (worker/src/testing/test_worker_main.cc).
Outcome TestWorker(const std::string& args, int timeout_s = 600);
// A folder for the files a test binary makes, shared by its tests.
std::filesystem::path WorkDir();

struct Example {
  std::string name;
  std::string knobs;    // export.py's model flags: the narrow CI variant
  std::string dataset;  // what it trains on
};
// The four examples in the narrow variants CI trains: cnn, resnet18,
// mobilenetv2 (digits) and encoder (tokens).
const std::vector<Example>& NarrowExamples();
// Exports the example once (PyTorch, training mode, Dropout 0.1) and returns the file.
std::string Exported(const Example& ex);

}  // namespace easyscale::clitest
