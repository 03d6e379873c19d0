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
  static RestorePoint Newest(const CheckpointStore& s) {
    auto p = s.NewestRestorable();
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : RestorePoint{};
  }
  void Save(const CheckpointStore& s, int64_t step) {
    ASSERT_TRUE(s.WriteJob(step, "job@" + std::to_string(step)).ok());
    ASSERT_TRUE(s.WriteEst(step, 0, "est0").ok());
    ASSERT_TRUE(s.WriteEst(step, 1, "est1").ok());
    ASSERT_TRUE(s.Commit(step, 2).ok());
  }
  std::string dir_;
};

TEST_F(CheckpointTest, RoundTripAndNewest) {
  CheckpointStore s(dir_);
  EXPECT_EQ(Newest(s).step, std::nullopt);
  Save(s, 10);
  EXPECT_EQ(Newest(s).step, 10);
  EXPECT_TRUE(Newest(s).skipped.empty());
  EXPECT_EQ(Newest(s).latest, "");
  EXPECT_EQ(*s.ReadJob(10), "job@10");
  EXPECT_EQ(*s.ReadEst(10, 1), "est1");
}

TEST_F(CheckpointTest, InterruptedSaveKeepsThePreviousCheckpoint) {
  CheckpointStore s(dir_);
  Save(s, 10);
  // A save that died before its commit: files of step 20 exist, no manifest.
  ASSERT_TRUE(s.WriteJob(20, "job@20").ok());
  ASSERT_TRUE(s.WriteEst(20, 0, "est0").ok());
  const RestorePoint p = Newest(s);
  EXPECT_EQ(p.step, 10);
  ASSERT_EQ(p.skipped.size(), 1u);
  EXPECT_EQ(p.skipped[0],
            s.StepDir(20) + "/MANIFEST.json: missing (a save interrupted before its commit)");
  EXPECT_EQ(*s.ReadJob(10), "job@10");
}

// A save interrupted before the first commit leaves no checkpoint: the run
// starts at step 0 (and says what it ignored).
TEST_F(CheckpointTest, InterruptedFirstSaveIsNoCheckpoint) {
  CheckpointStore s(dir_);
  ASSERT_TRUE(s.WriteJob(10, "job@10").ok());
  const RestorePoint p = Newest(s);
  EXPECT_EQ(p.step, std::nullopt);
  EXPECT_EQ(p.skipped.size(), 1u);
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

// Regression (issue 16): one corrupt file in the newest checkpoint failed the
// resume although the previous checkpoint was intact beside it.
TEST_F(CheckpointTest, FallsBackToTheNewestIntactCheckpoint) {
  CheckpointStore s(dir_);
  Save(s, 10);
  Save(s, 20);
  const std::string est = s.StepDir(20) + "/est-00001.esck";
  ASSERT_TRUE(WriteFileAtomic(est, "garbage").ok());
  const RestorePoint p = Newest(s);
  EXPECT_EQ(p.step, 10);
  ASSERT_EQ(p.skipped.size(), 1u);
  EXPECT_EQ(p.skipped[0], est + ": does not match its manifest (corrupt or tampered)");
  EXPECT_EQ(p.latest, "LATEST names \"ckpt-000000020\"");
  // Training goes on from 10 and saves 20 again: 10 stays as the fall-back.
  Save(s, 20);
  EXPECT_EQ(Newest(s).step, 20);
  EXPECT_TRUE(std::filesystem::exists(s.StepDir(10)));
}

// Regression (issue 16): deleting LATEST restarted training from step 0 without
// a word while checkpoints existed.
TEST_F(CheckpointTest, FindsCheckpointsWithoutLatest) {
  CheckpointStore s(dir_);
  Save(s, 10);
  Save(s, 20);
  std::filesystem::remove(dir_ + "/LATEST");
  const RestorePoint p = Newest(s);
  EXPECT_EQ(p.step, 20);
  EXPECT_EQ(p.latest, "LATEST is missing");
}

// Checkpoints were committed and none is intact: an error listing each folder
// and why, never a silent start at step 0.
TEST_F(CheckpointTest, NoIntactCheckpointIsAnErrorListingEach) {
  CheckpointStore s(dir_);
  Save(s, 10);
  Save(s, 20);
  ASSERT_TRUE(WriteFileAtomic(s.StepDir(20) + "/job.esck", "x").ok());
  std::filesystem::remove(s.StepDir(10) + "/MANIFEST.json");
  std::filesystem::remove(dir_ + "/LATEST");
  auto p = s.NewestRestorable();
  ASSERT_TRUE(absl::IsDataLoss(p.status())) << p.status();
  const std::string msg(p.status().message());
  EXPECT_NE(msg.find("no intact checkpoint in " + dir_), std::string::npos) << msg;
  EXPECT_NE(msg.find(s.StepDir(20) + "/job.esck: does not match its manifest"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find(s.StepDir(10) + "/MANIFEST.json: missing"), std::string::npos) << msg;
  // LATEST alone is evidence enough that a checkpoint was committed.
  std::filesystem::remove_all(s.StepDir(10));
  std::filesystem::remove_all(s.StepDir(20));
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/LATEST", "ckpt-000000020").ok());
  EXPECT_TRUE(absl::IsDataLoss(s.NewestRestorable().status()));
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
  EXPECT_TRUE(absl::IsDataLoss(s.NewestRestorable().status()));
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
  EXPECT_EQ(Newest(s).step, 10);
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
