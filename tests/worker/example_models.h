// File: tests/worker/example_models.h
//
// What the end-to-end tests of users' models share: running easyscale-worker
// (and Python) as a child process, and the example models of
// deploy/examples/models exported once per test process with Debian's
// python3-torch.
//   Outcome r = Worker("local --ests 4 --model-file " + Exported(kCnn) + " ...");
//   EXPECT_EQ(r.exit_code, 0) << r.output;  // r.digest, r.accuracy parsed from it
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace easyscale::testing {

inline constexpr char kPython[] = "/usr/bin/python3";

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
  std::string digest;  // of a "digest: <64 hex>" line
  double accuracy = -1;
};

// Runs argv; a command that cannot start gives exit_code -1 and says why.
Outcome Command(std::vector<std::string> argv, int timeout_s = 600);
// easyscale-worker with the space-separated arguments.
Outcome Worker(const std::string& args);
// The test program's scratch folder (shared by its test processes).
std::filesystem::path WorkDir();

struct Example {
  std::string name;
  std::string knobs;    // export.py's model flags: the narrow CI variant
  std::string dataset;  // what it trains on
};

// The four examples in the narrow variants CI trains: cnn, resnet18,
// mobilenetv2 (digits) and encoder (tokens).
const std::vector<Example>& NarrowExamples();

// Exports the example once (PyTorch, training mode, seed 3, Dropout 0.1) and
// returns the file.
std::string Exported(const Example& ex);

// The source tree (deploy/examples/models, tests/worker scripts).
std::string SourceDir();

}  // namespace easyscale::testing
