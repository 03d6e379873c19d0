// The consistency proof: the standard job (CNN with BatchNorm, Dropout and
// augmentation on the MNIST digits, N = 8 ESTs, 120 steps) gives one digest
// for every schedule of worker processes, through scale events and a SIGKILL.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/subprocess.h"

namespace {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
  std::string digest;
  double accuracy = -1;
};

// Runs easyscale-worker with the space-separated `args`.
RunResult Worker(const std::string& args) {
  std::vector<std::string> argv = {EASYSCALE_WORKER_BIN};
  for (absl::string_view a : absl::StrSplit(args, ' ', absl::SkipEmpty())) argv.emplace_back(a);
  RunResult r;
  easyscale::StatusOr<easyscale::CommandResult> run =
      easyscale::RunCommand({.argv = argv,
                             .stdoutTo = easyscale::Output::Pipe(),
                             .stderrTo = easyscale::Output::SameAsStdout()},
                            std::chrono::minutes(5));
  if (!run.ok()) {
    r.output = run.status().ToString();
    return r;
  }
  r.exit_code = run->exitCode;
  r.output = std::move(run->out);
  std::smatch m;
  if (std::regex_search(r.output, m, std::regex("\ndigest: ([0-9a-f]{64})\n"))) r.digest = m[1];
  if (std::regex_search(r.output, m, std::regex("test accuracy: ([0-9.]+)")))
    r.accuracy = std::stod(m[1]);
  return r;
}

const std::string kJob = "--ests 8 --steps 120 --model cnn --dataset mnist --seed 1 ";

std::string Digest(const std::string& schedule, const std::string& extra = "") {
  RunResult r = Worker("local " + kJob + "--schedule " + schedule + " " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.digest.size(), 64u) << r.output;
  return r.digest;
}

const std::string& Reference() {
  static const std::string digest = Digest("0:8,20:3,45:5,70:1,90:8");
  return digest;
}

TEST(Consistency, SameDigestForEveryWorkerCount) {
  const std::string& ref = Reference();
  EXPECT_EQ(Digest("0:8"), ref);
  EXPECT_EQ(Digest("0:1"), ref);
  EXPECT_EQ(Digest("0:2"), ref);
  EXPECT_EQ(Digest("0:3"), ref);  // 3, 3, 2 ESTs per worker
}

TEST(Consistency, SameDigestAfterSigkillAndResume) {
  RunResult r =
      Worker("local " + kJob + "--schedule 0:3,60:2 --checkpoint-every 10 --kill-worker-at 37");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("restarting the segment from the last checkpoint"), std::string::npos);
  EXPECT_EQ(r.digest, Reference());
}

// A backend failing mid-step loses nothing: the worker names the failure, the
// last checkpoint is intact, and the restarted segment ends with the digest.
// On a GPU the fault is a kernel writing to an illegal address, which leaves
// the process's CUDA context unusable, as a real device fault does.
class BackendFault : public ::testing::TestWithParam<const char*> {};
TEST_P(BackendFault, ClearErrorAndResumeFromLastCheckpoint) {
  const std::string backend = GetParam();
  if (backend != "cpu") {
    RunResult probe = Worker("local --ests 2 --steps 1 --schedule 0:1 --backend cuda");
    if (probe.exit_code != 0) GTEST_SKIP() << "needs a CUDA build and GPU: " << probe.output;
  }
  RunResult r = Worker("local " + kJob +
                       "--schedule 0:3,60:2 --checkpoint-every 10 --fault-worker-at 37 "
                       "--backend " +
                       backend);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string failed =
      (backend == "cpu" ? "cpu" : "cuda") + std::string(" backend failed at step 37");
  EXPECT_NE(r.output.find(failed), std::string::npos) << r.output;
  if (backend != "cpu") {
    EXPECT_NE(r.output.find("cudaErrorIllegalAddress"), std::string::npos) << r.output;
  }
  EXPECT_NE(r.output.find("restarting the segment from the last checkpoint"), std::string::npos);
  EXPECT_EQ(r.digest, Reference());
}
INSTANTIATE_TEST_SUITE_P(Backends, BackendFault, ::testing::Values("cpu", "cuda", "mixed"));

TEST(Consistency, DefaultRunIsTheStandardJobAndReachesAccuracy) {
  RunResult r = Worker("local");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.digest, Reference());
  EXPECT_GE(r.accuracy, 0.95) << r.output;
  EXPECT_NE(r.output.find("\"event\":\"scale\""), std::string::npos);
}

TEST(Consistency, MlpWithAdamAndStepScheduleToo) {
  auto digest = [](const std::string& schedule) {
    RunResult r = Worker(
        "local --ests 6 --steps 60 --model mlp --optimizer adam --lr 0.002 "
        "--lr-schedule step --warmup-steps 5 --schedule " +
        schedule);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.digest;
  };
  const std::string one = digest("0:1");
  EXPECT_EQ(one.size(), 64u);
  EXPECT_EQ(digest("0:4,30:2,45:5"), one);
}

TEST(Consistency, SeedChangesDigest) { EXPECT_NE(Digest("0:2", "--seed 2"), Reference()); }

// Each field of the EST context matters: forgetting it on every scale event
// changes the bits. (The switch is test-only.)
class DroppedField : public ::testing::TestWithParam<const char*> {};
TEST_P(DroppedField, BreaksEquality) {
  const std::string d =
      Digest("0:8,20:3,45:5,70:1,90:8", std::string("--test-drop-context-field ") + GetParam());
  EXPECT_NE(d, Reference()) << GetParam();
}
INSTANTIATE_TEST_SUITE_P(EstContext, DroppedField, ::testing::Values("rng", "cursor", "bn"));

struct BadCase {
  const char* name;
  std::string args;
  std::string message;
};

class BadInput : public ::testing::TestWithParam<BadCase> {};
TEST_P(BadInput, ClearOneLineErrorAndNonZeroExit) {
  const BadCase& c = GetParam();
  RunResult r = Worker(c.args);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.exit_code, 128) << "crashed: " << r.output;
  EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(c.message), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}
INSTANTIATE_TEST_SUITE_P(
    Flags, BadInput,
    ::testing::Values(
        BadCase{"UnknownFlag", "local --estz 8", "unknown flag --estz"},
        BadCase{"NotANumber", "local --ests eight", "--ests: expected an integer"},
        BadCase{"MalformedSchedule", "local --schedule 0:2,x", "is not STEP:WORKERS"},
        BadCase{"ScheduleNotFromZero", "local --schedule 3:2", "must start at step 0"},
        BadCase{"MoreWorkersThanEsts", "local --ests 4 --schedule 0:5", "N < P"},
        BadCase{"UnknownModel", "local --model resnet", "model"},
        BadCase{"UnknownCommand", "train", "unknown command"},
        BadCase{"UnknownBackend", "local --backend tpu", "want cpu, cuda or mixed"},
        BadCase{"StrayArgument", "run --assignment a.json extra", "unexpected argument \"extra\""},
        BadCase{"MissingData", "local --data /nonexistent/digits.esd", "/nonexistent/digits.esd"}),
    [](const auto& info) { return info.param.name; });

class DataAndCheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (std::filesystem::temp_directory_path() / ("es-e2e-" + std::to_string(getpid()))).string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DataAndCheckpointFiles, CorruptDataFileIsRejected) {
  auto data = easyscale::ReadFile(EASYSCALE_MNIST_DATA);
  ASSERT_TRUE(data.ok()) << data.status();
  std::string bytes = *data;
  bytes[bytes.size() / 2] ^= 0x55;
  ASSERT_TRUE(easyscale::WriteFileAtomic(dir_ + "/bad.esd", bytes).ok());
  RunResult r = Worker("local --data " + dir_ + "/bad.esd");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("checksum mismatch"), std::string::npos) << r.output;
}

// RunResult a short job keeping its checkpoints, damage them, and resume: a clear
// error, and the damaged checkpoint is never silently replaced by a fresh start.
TEST_F(DataAndCheckpointFiles, TruncatedOrTamperedCheckpointIsRejected) {
  const std::string job =
      "local --ests 4 --steps 12 --schedule 0:2 --checkpoint-every 5 --checkpoint-dir " + dir_;
  RunResult first = Worker(job);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto latest = easyscale::ReadFile(dir_ + "/LATEST");
  ASSERT_TRUE(latest.ok()) << latest.status();
  const std::string est = dir_ + "/" + *latest + "/est-00002.esck";
  auto good_bytes = easyscale::ReadFile(est);
  ASSERT_TRUE(good_bytes.ok()) << good_bytes.status();
  const std::string good = *good_bytes;

  ASSERT_TRUE(easyscale::WriteFileAtomic(est, good.substr(0, good.size() / 2)).ok());
  RunResult truncated = Worker(job);
  EXPECT_EQ(truncated.exit_code, 3) << truncated.output;
  EXPECT_NE(truncated.output.find("est-00002.esck"), std::string::npos) << truncated.output;

  std::string tampered = good;
  tampered[40] ^= 0x01;
  ASSERT_TRUE(easyscale::WriteFileAtomic(est, tampered).ok());
  RunResult bad = Worker(job);
  EXPECT_EQ(bad.exit_code, 3) << bad.output;
  EXPECT_NE(bad.output.find("corrupt or tampered"), std::string::npos) << bad.output;

  // Restored file: the same job resumes and finishes with its digest.
  ASSERT_TRUE(easyscale::WriteFileAtomic(est, good).ok());
  RunResult resumed = Worker(job);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(resumed.digest, first.digest);
}

}  // namespace
