// `easyscale-worker local` owns its workers and its checkpoint folder: a
// SIGKILLed runner takes its workers along, a second run on a folder in use
// fails at once naming the folder and the holder, and once the first run is
// gone a new one resumes from its checkpoints with the uninterrupted digest.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "easyscale/common/subprocess.h"

namespace easyscale {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> LocalArgs(const std::string& checkpoint_dir) {
  std::vector<std::string> args = {EASYSCALE_WORKER_BIN,
                                   "local",
                                   "--ests",
                                   "4",
                                   "--schedule",
                                   "0:3",
                                   "--steps",
                                   "300",
                                   "--model",
                                   "mlp",
                                   "--digits-file",
                                   EASYSCALE_MNIST_DATA,
                                   "--checkpoint-every",
                                   "10"};
  if (!checkpoint_dir.empty()) args.insert(args.end(), {"--checkpoint-dir", checkpoint_dir});
  return args;
}

// The step of a progress line, or nullopt for other lines.
std::optional<int64_t> StepOf(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object() || j.value("event", "") != "step") return std::nullopt;
  return j.value("step", int64_t{0});
}

// Processes whose parent is `parent`, from /proc/<pid>/stat ("pid (comm) state ppid ...").
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat) || stat.rfind(')') == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + stat.rfind(')') + 1, " %c %d", &state, &ppid) == 2 &&
        ppid == parent) {
      out.push_back(std::stoi(entry.path().filename().string()));
    }
  }
  return out;
}

// Alive and not a zombie waiting to be reaped.
bool Running(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat) || stat.rfind(')') == std::string::npos) return false;
  const char state = stat[stat.rfind(')') + 2];
  return state != 'Z' && state != 'X';
}

bool AllGoneWithin(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool any = false;
    for (pid_t p : pids) any = any || Running(p);
    if (!any) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

class LocalRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (std::filesystem::temp_directory_path() / ("es-local-runner-" + std::to_string(getpid())))
            .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    for (pid_t p : workers_) {
      if (Running(p)) ::kill(p, SIGKILL);  // what a broken runner left behind
    }
    std::filesystem::remove_all(dir_);
  }

  // Starts a runner on dir_ and returns once it has reported `step`; its
  // workers are then in workers_.
  Subprocess StartRunnerUntil(int64_t step) {
    StatusOr<Subprocess> runner = Subprocess::Start(
        {.argv = LocalArgs(dir_), .stdoutTo = Output::Pipe(), .parentDeathSignal = SIGKILL});
    EXPECT_TRUE(runner.ok()) << runner.status();
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      std::optional<std::string> line = runner->ReadLine(1s);
      if (line.has_value() && StepOf(*line).value_or(0) >= step) break;
      if (runner->stdoutEnded()) break;
    }
    workers_ = ChildrenOf(runner->pid());
    return std::move(*runner);
  }

  std::string dir_;
  std::vector<pid_t> workers_;
};

TEST_F(LocalRunnerTest, WorkersDieWithARunnerKilledBySigkill) {
  Subprocess runner = StartRunnerUntil(3);
  ASSERT_EQ(workers_.size(), 3u) << "the runner should have three workers at step 3";
  // Frozen, as in a long step: nothing but the kernel tells them the runner is gone.
  for (pid_t p : workers_) ::kill(p, SIGSTOP);
  runner.Signal(SIGKILL);
  ASSERT_EQ(runner.Wait(5s), 128 + SIGKILL);
  EXPECT_TRUE(AllGoneWithin(workers_, 2s)) << "workers outlived their runner";
}

TEST_F(LocalRunnerTest, SigtermStopsTheWorkersAndFailsTheRun) {
  Subprocess runner = StartRunnerUntil(2);
  ASSERT_EQ(workers_.size(), 3u);
  runner.Signal(SIGTERM);
  std::string said;
  while (std::optional<std::string> line = runner.ReadLine(30s)) said += *line + "\n";
  const std::optional<int> code = runner.Wait(30s);
  ASSERT_TRUE(code.has_value()) << "still running after SIGTERM";
  EXPECT_NE(*code, 0);
  EXPECT_LT(*code, 128) << "it should end on its own, not by the signal";
  EXPECT_TRUE(AllGoneWithin(workers_, 2s));
  // Before the first periodic checkpoint (step 10): this one is the workers' own, on SIGTERM.
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/LATEST")) << said;
}

TEST_F(LocalRunnerTest, AFolderInUseRefusesASecondRunThenResumesAfterTheFirst) {
  Subprocess first = StartRunnerUntil(25);  // checkpoints at 10 and 20 exist
  ASSERT_EQ(workers_.size(), 3u);
  // Frozen, the first run stays alive and in the middle of its job for as
  // long as the second one needs.
  for (pid_t p : workers_) ::kill(p, SIGSTOP);
  first.Signal(SIGSTOP);

  const auto start = std::chrono::steady_clock::now();
  StatusOr<CommandResult> second = RunCommand(
      {.argv = LocalArgs(dir_), .stdoutTo = Output::Pipe(), .stderrTo = Output::SameAsStdout()},
      120s);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "did not fail at once";
  EXPECT_NE(second->exitCode, 0) << second->out;
  EXPECT_NE(second->out.find("error: --checkpoint-dir: folder " + dir_ +
                             " is in use by another run (pid " + std::to_string(first.pid()) + ")"),
            std::string::npos)
      << second->out;
  EXPECT_EQ(first.Poll(), std::nullopt) << "the first run must not be disturbed";

  first.Signal(SIGKILL);
  ASSERT_EQ(first.Wait(5s), 128 + SIGKILL);
  ASSERT_TRUE(AllGoneWithin(workers_, 2s));

  StatusOr<CommandResult> resumed = RunCommand(
      {.argv = LocalArgs(dir_), .stdoutTo = Output::Pipe(), .stderrTo = Output::SameAsStdout()},
      300s);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->exitCode, 0) << resumed->out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(resumed->out, m, std::regex(R"("event":"step".*"step":(\d+))")));
  EXPECT_GT(std::stoll(m[1]), 10) << "did not resume from a checkpoint";

  StatusOr<CommandResult> fresh = RunCommand(
      {.argv = LocalArgs(""), .stdoutTo = Output::Pipe(), .stderrTo = Output::SameAsStdout()},
      300s);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->exitCode, 0) << fresh->out;
  const auto digest = [](const std::string& out) { return out.substr(out.rfind("digest: ")); };
  EXPECT_EQ(digest(resumed->out), digest(fresh->out));
}

}  // namespace
}  // namespace easyscale
