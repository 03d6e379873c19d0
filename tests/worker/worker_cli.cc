#include "worker_cli.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>

#include "absl/strings/str_split.h"
#include "easyscale/common/subprocess.h"

namespace easyscale::clitest {

namespace fs = std::filesystem;

Outcome Command(std::vector<std::string> argv, int timeout_s) {
  Outcome r;
  StatusOr<CommandResult> c =
      RunCommand({.argv = argv, .stdoutTo = Output::Pipe(), .stderrTo = Output::SameAsStdout()},
                 std::chrono::seconds(timeout_s));
  if (!c.ok()) {
    r.output = c.status().ToString();
    return r;
  }
  r.exit_code = c->exitCode;
  r.output = std::move(c->out);
  std::smatch m;
  if (std::regex_search(r.output, m, std::regex("\ndigest: ([0-9a-f]{64})\n"))) r.digest = m[1];
  if (std::regex_search(r.output, m, std::regex("test accuracy: ([0-9.]+)")))
    r.accuracy = std::stod(m[1]);
  return r;
}

namespace {

Outcome Binary(const std::string& binary, const std::string& args, int timeout_s) {
  std::vector<std::string> argv = {binary};
  for (absl::string_view a : absl::StrSplit(args, ' ', absl::SkipEmpty())) argv.emplace_back(a);
  return Command(argv, timeout_s);
}

}  // namespace

Outcome Worker(const std::string& args, int timeout_s) {
  return Binary(EASYSCALE_WORKER_BIN, args, timeout_s);
}

Outcome TestWorker(const std::string& args, int timeout_s) {
  return Binary(EASYSCALE_TEST_WORKER_BIN, args, timeout_s);
}

fs::path WorkDir() {
  static const fs::path dir = [] {
    fs::path d = fs::path(::testing::TempDir()) / "worker_cli_test";
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

const std::vector<Example>& NarrowExamples() {
  static const std::vector<Example> kExamples = {
      {"cnn", "--model cnn", "mnist"},
      {"resnet18", "--model resnet18 --width 8", "mnist"},
      {"mobilenetv2", "--model mobilenetv2 --width 0.25", "mnist"},
      {"encoder", "--model encoder --width 32 --seq-len 32 --vocab 128", "tokens"}};
  return kExamples;
}

std::string Exported(const Example& ex) {
  const fs::path out = WorkDir() / (ex.name + ".onnx");
  if (fs::exists(out)) return out.string();
  // ctest runs the tests as processes side by side, several exporting the
  // same model into WorkDir: each writes its own file and renames it into
  // place, so no test reads another's half-written export.
  const fs::path part = WorkDir() / (ex.name + ".onnx.part-" + std::to_string(::getpid()));
  std::vector<std::string> argv = {kPython, kSource + "/deploy/examples/models/export.py"};
  for (absl::string_view a : absl::StrSplit(ex.knobs, ' ', absl::SkipEmpty())) argv.emplace_back(a);
  for (const char* a : {"--seed", "3", "--dropout", "0.1", "--out"}) argv.emplace_back(a);
  argv.push_back(part.string());
  Outcome r = Command(argv);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::error_code renamed;
  fs::rename(part, out, renamed);
  EXPECT_FALSE(renamed) << part << ": " << renamed.message();
  return out.string();
}

}  // namespace easyscale::clitest
