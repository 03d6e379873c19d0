#include "plugin_process.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace easyscale::dp::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TempDir::TempDir() {
  char tmpl[] = "/tmp/esdp.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void TempDir::Write(const std::string& name, const std::string& content) const {
  // Write then rename, so the plugin never reads half a file.
  const std::string target = path_ + "/" + name;
  const std::string tmp = target + ".tmp";
  std::ofstream(tmp) << content;
  std::filesystem::rename(tmp, target);
}

std::string TempDir::Read(const std::string& name) const { return ReadAll(path_ + "/" + name); }

PluginProcess::PluginProcess(const std::string& dir, const std::vector<std::string>& args)
    : dir_(dir) {
  std::vector<std::string> argv = {EASYSCALE_DEVICE_PLUGIN_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  StatusOr<Subprocess> p = Subprocess::Start({.argv = std::move(argv),
                                              .stdoutTo = Output::File(dir + "/plugin.stdout"),
                                              .stderrTo = Output::File(dir + "/plugin.stderr"),
                                              .parentDeathSignal = SIGKILL,
                                              .stopGrace = std::chrono::seconds(5)});
  if (!p.ok()) throw std::runtime_error(p.status().ToString());
  process_ = std::move(*p);
}

int PluginProcess::Wait(std::chrono::milliseconds timeout) {
  return process_->Wait(timeout).value_or(-1);
}

std::string PluginProcess::Stdout() const { return ReadAll(dir_ + "/plugin.stdout"); }

std::string PluginProcess::Stderr() const { return ReadAll(dir_ + "/plugin.stderr"); }

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

}  // namespace easyscale::dp::testing
