#include "easyscale/common/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "easyscale/common/file_io.h"

namespace easyscale {
namespace {

using namespace std::chrono_literals;

SubprocessOptions Shell(const std::string& script) { return {.argv = {"sh", "-c", script}}; }

SubprocessOptions Captured(SubprocessOptions o) {
  o.stdoutTo = Output::Pipe();
  o.stderrTo = Output::Pipe();
  return o;
}

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST(RunCommandTest, CapturesBothOutputsAndTheExitCode) {
  StatusOr<CommandResult> r = RunCommand(Captured(Shell("echo out; echo err >&2; exit 3")), 10s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exitCode, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
}

TEST(RunCommandTest, StderrCanJoinStdout) {
  SubprocessOptions o = Shell("echo a; echo b >&2; echo c");
  o.stdoutTo = Output::Pipe();
  o.stderrTo = Output::SameAsStdout();
  StatusOr<CommandResult> r = RunCommand(o, 10s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "a\nb\nc\n");
}

TEST(RunCommandTest, EnvironmentIsInheritedWithOverridesOrExact) {
  ::setenv("ES_SUBPROCESS_TEST_KEPT", "kept", 1);
  SubprocessOptions o = Captured({.argv = {"env"}, .env = {{"ES_ADDED", "1"}}});
  StatusOr<CommandResult> r = RunCommand(o, 10s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->out.find("ES_SUBPROCESS_TEST_KEPT=kept\n"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("ES_ADDED=1\n"), std::string::npos) << r->out;

  o.inheritEnv = false;
  r = RunCommand(o, 10s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, "ES_ADDED=1\n");
}

TEST(RunCommandTest, ACommandPastItsTimeIsKilled) {
  const auto start = std::chrono::steady_clock::now();
  StatusOr<CommandResult> r = RunCommand(Captured(Shell("exec sleep 30")), 200ms);
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(SubprocessTest, StartErrorsNameTheProgram) {
  StatusOr<Subprocess> missing = Subprocess::Start({.argv = {"/nonexistent/es-prog"}});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("/nonexistent/es-prog"), std::string::npos);

  StatusOr<Subprocess> not_on_path = Subprocess::Start({.argv = {"es-no-such-program"}});
  EXPECT_TRUE(absl::IsNotFound(not_on_path.status())) << not_on_path.status();
  EXPECT_NE(not_on_path.status().message().find("es-no-such-program"), std::string::npos);

  StatusOr<Subprocess> bad_log =
      Subprocess::Start({.argv = {"true"}, .stdoutTo = Output::File("/nonexistent/dir/log")});
  EXPECT_FALSE(bad_log.ok());
  EXPECT_NE(bad_log.status().message().find("/nonexistent/dir/log"), std::string::npos);
}

TEST(SubprocessTest, OutputGoesToAFileTruncatedOrAppended) {
  const std::string log =
      (std::filesystem::temp_directory_path() / ("es-sub-" + std::to_string(getpid()))).string();
  for (bool append : {false, true}) {
    StatusOr<Subprocess> p = Subprocess::Start({.argv = {"sh", "-c", "echo line; echo err >&2"},
                                                .stdoutTo = Output::File(log, append),
                                                .stderrTo = Output::SameAsStdout()});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->Wait(10s), 0);
  }
  EXPECT_EQ(*ReadFile(log, 1 << 20), "line\nerr\nline\nerr\n");
  StatusOr<Subprocess> p =
      Subprocess::Start({.argv = {"echo", "fresh"}, .stdoutTo = Output::File(log)});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Wait(10s), 0);
  EXPECT_EQ(*ReadFile(log, 1 << 20), "fresh\n");
  std::filesystem::remove(log);
}

TEST(SubprocessTest, ReadLineWaitsAtMostItsTimeout) {
  StatusOr<Subprocess> p = Subprocess::Start(Captured(Shell("echo a; sleep 0.5; printf b")));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ReadLine(10s), "a");
  EXPECT_EQ(p->ReadLine(20ms), std::nullopt);
  EXPECT_FALSE(p->stdoutEnded());
  EXPECT_EQ(p->ReadLine(10s), "b");  // the last line needs no newline
  EXPECT_EQ(p->ReadLine(10s), std::nullopt);
  EXPECT_TRUE(p->stdoutEnded());
  EXPECT_EQ(p->Wait(10s), 0);
  EXPECT_EQ(p->Describe(), "exit code 0");
}

TEST(SubprocessTest, SignalPollAndDescribe) {
  StatusOr<Subprocess> p = Subprocess::Start({.argv = {"sleep", "30"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Poll(), std::nullopt);
  EXPECT_EQ(p->Describe(), "running");
  p->Signal(SIGTERM);
  EXPECT_EQ(p->Wait(10s), 128 + SIGTERM);
  EXPECT_EQ(p->Describe(), "killed by signal 15 (Terminated)");
}

TEST(SubprocessTest, WaitOrKillEscalatesAfterTheGrace) {
  StatusOr<Subprocess> p = Subprocess::Start(Shell("trap '' TERM; exec sleep 30"));
  ASSERT_TRUE(p.ok()) << p.status();
  std::this_thread::sleep_for(100ms);  // the trap is set
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(p->WaitOrKill(300ms), 128 + SIGKILL);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

TEST(SubprocessTest, DestructionKillsAndReaps) {
  pid_t pid = -1;
  {
    StatusOr<Subprocess> p = Subprocess::Start({.argv = {"sleep", "30"}});
    ASSERT_TRUE(p.ok()) << p.status();
    pid = p->pid();
    Subprocess moved = std::move(*p);  // the handle moves; the child is killed once
    EXPECT_TRUE(Alive(pid));
  }
  EXPECT_FALSE(Alive(pid));  // not even a zombie: reaped
}

TEST(SubprocessTest, ChildDiesWithTheThreadThatStartedIt) {
  std::optional<Subprocess> child;
  std::thread starter([&] {
    StatusOr<Subprocess> p =
        Subprocess::Start({.argv = {"sleep", "30"}, .parentDeathSignal = SIGKILL});
    ASSERT_TRUE(p.ok()) << p.status();
    child = std::move(*p);
  });
  starter.join();
  ASSERT_TRUE(child.has_value());
  EXPECT_EQ(child->Wait(10s), 128 + SIGKILL);
}

TEST(SubprocessTest, BeforeExecRunsInTheChild) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  SubprocessOptions o = Captured({.argv = {"pwd"}});
  o.beforeExec = [&dir] { return ::chdir(dir.c_str()) == 0 ? 0 : errno; };
  StatusOr<CommandResult> r = RunCommand(o, 10s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out, std::filesystem::canonical(dir).string() + "\n");

  o.beforeExec = [] { return EPERM; };
  r = RunCommand(o, 10s);
  EXPECT_TRUE(absl::IsPermissionDenied(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("pwd: before exec: Operation not permitted"),
            std::string::npos)
      << r.status();
}

TEST(SubprocessTest, KeptDescriptorsSurviveExec) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const std::string script = "echo kept >&" + std::to_string(fds[1]);
  StatusOr<Subprocess> p = Subprocess::Start({.argv = {"sh", "-c", script}, .keepFds = {fds[1]}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Wait(10s), 0);
  ::close(fds[1]);
  char buf[16] = {};
  EXPECT_EQ(::read(fds[0], buf, sizeof buf), 5);
  EXPECT_STREQ(buf, "kept\n");
  ::close(fds[0]);
}

}  // namespace
}  // namespace easyscale
