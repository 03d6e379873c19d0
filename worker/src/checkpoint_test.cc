#include "easyscale/worker/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "easyscale/common/file_io.h"
#include "testing/small_tmpfs.h"

namespace easyscale {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("es-ckpt-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Save(const CheckpointStore& s, int64_t step) {
    ASSERT_TRUE(s.WriteJob(step, "job@" + std::to_string(step)).ok());
    ASSERT_TRUE(s.WriteEst(step, 0, "est0").ok());
    ASSERT_TRUE(s.WriteEst(step, 1, "est1").ok());
    ASSERT_TRUE(s.Commit(step, 2).ok());
  }
  std::string dir_;
};

TEST_F(CheckpointTest, RoundTripAndLatest) {
  CheckpointStore s(dir_);
  EXPECT_TRUE(absl::IsNotFound(s.LatestStep().status()));
  Save(s, 10);
  EXPECT_EQ(*s.LatestStep(), 10);
  EXPECT_EQ(*s.ReadJob(10), "job@10");
  EXPECT_EQ(*s.ReadEst(10, 1), "est1");
}

TEST_F(CheckpointTest, InterruptedSaveKeepsThePreviousCheckpoint) {
  CheckpointStore s(dir_);
  Save(s, 10);
  // A save that died before its commit: files of step 20 exist, no manifest.
  ASSERT_TRUE(s.WriteJob(20, "job@20").ok());
  ASSERT_TRUE(s.WriteEst(20, 0, "est0").ok());
  EXPECT_EQ(*s.LatestStep(), 10);
  EXPECT_EQ(*s.ReadJob(10), "job@10");
}

TEST_F(CheckpointTest, KeepsTwoNewest) {
  CheckpointStore s(dir_);
  Save(s, 10);
  Save(s, 20);
  Save(s, 30);
  EXPECT_FALSE(std::filesystem::exists(s.StepDir(10)));
  EXPECT_TRUE(std::filesystem::exists(s.StepDir(20)));
  EXPECT_EQ(*s.ReadJob(30), "job@30");
}

TEST_F(CheckpointTest, TruncatedAndTamperedFilesAreRejected) {
  CheckpointStore s(dir_);
  Save(s, 10);
  const std::string est = s.StepDir(10) + "/est-00001.esck";
  std::string bytes = *ReadFile(est, 1 << 20);
  ASSERT_TRUE(WriteFileAtomic(est, bytes.substr(0, bytes.size() - 3)).ok());
  EXPECT_NE(std::string(s.ReadEst(10, 1).status().message()).find("does not match its manifest"),
            std::string::npos);
  // The envelope alone also catches both, without the manifest.
  EXPECT_NE(
      std::string(DecodeEnvelope(bytes.substr(0, 30), CheckpointKind::kEst, "x").status().message())
          .find("truncated"),
      std::string::npos);
  bytes[26] ^= 0x40;
  EXPECT_NE(std::string(DecodeEnvelope(bytes, CheckpointKind::kEst, "x").status().message())
                .find("checksum mismatch"),
            std::string::npos);
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/LATEST", "garbage").ok());
  EXPECT_TRUE(absl::IsDataLoss(s.LatestStep().status()));
}

// Regression (issue 16): a save on a full disk fails saying so, naming the file
// it wrote, and the previous checkpoint stays the one a resume starts from.
TEST_F(CheckpointTest, SaveOnFullDiskSaysSoAndKeepsThePrevious) {
  testing::SmallTmpfs fs(256 << 10);
  if (!fs.ok()) GTEST_SKIP() << fs.why_not();
  CheckpointStore s(fs.path() + "/job");
  Save(s, 10);
  fs.Fill();
  const Status st = s.WriteJob(20, std::string(64 << 10, 'j'));
  EXPECT_TRUE(absl::IsResourceExhausted(st)) << st;
  EXPECT_EQ(st.message(),
            "writing " + s.StepDir(20) + "/job.esck: No space left on device (ENOSPC)");
  EXPECT_FALSE(s.Commit(20, 2).ok());
  EXPECT_EQ(*s.LatestStep(), 10);
  EXPECT_EQ(*s.ReadJob(10), "job@10");
  EXPECT_EQ(*s.ReadEst(10, 1), "est1");
}

TEST_F(CheckpointTest, KindIsChecked) {
  const std::string env = EncodeEnvelope(CheckpointKind::kJob, "payload");
  EXPECT_EQ(*DecodeEnvelope(env, CheckpointKind::kJob, "x"), "payload");
  EXPECT_FALSE(DecodeEnvelope(env, CheckpointKind::kEst, "x").ok());
}

}  // namespace
}  // namespace easyscale
