#include "easyscale/common/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <utility>

#include "testing/small_tmpfs.h"

namespace easyscale {
namespace {

class FileIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("es-fileio-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(MakeDirs(dir_.string()).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(FileIoTest, AtomicWriteReplacesAndLeavesNoTemporary) {
  const std::string path = (dir_ / "a.bin").string();
  ASSERT_TRUE(WriteFileAtomic(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomic(path, std::string("sec\0nd", 6)).ok());
  auto content = ReadFile(path, 1 << 20);
  ASSERT_TRUE(content.ok());
  EXPECT_EQ(*content, std::string("sec\0nd", 6));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(FileIoTest, FailedWriteKeepsOldContent) {
  const std::string path = (dir_ / "keep.bin").string();
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  // A target that is a folder cannot be replaced: the old file elsewhere stays.
  const std::string blocked = (dir_ / "sub").string();
  ASSERT_TRUE(MakeDirs(blocked + "/x").ok());
  EXPECT_FALSE(WriteFileAtomic(blocked, "new").ok());
  EXPECT_EQ(*ReadFile(path, 1 << 20), "old");
}

// Regression (issue 16): --data /dev/zero read until memory ran out, a FIFO
// blocked forever. Only regular files are read, and only up to the bound.
TEST_F(FileIoTest, ReadsOnlyRegularFilesWithinTheBound) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::pair<std::string, std::string> refused[] = {
      {"/dev/zero", "reading /dev/zero: is a character device, not a regular file"},
      {fifo, "reading " + fifo + ": is a FIFO, not a regular file"},
      {dir_.string(), "reading " + dir_.string() + ": is a folder, not a regular file"},
  };
  for (const auto& [path, want] : refused) {
    auto r = ReadFile(path, 1 << 20);
    EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
    EXPECT_EQ(r.status().message(), want);
  }
  const std::string path = (dir_ / "ten").string();
  ASSERT_TRUE(WriteFileAtomic(path, "0123456789").ok());
  EXPECT_EQ(*ReadFile(path, 10), "0123456789");
  EXPECT_EQ(ReadFile(path, 9).status().message(),
            "reading " + path + ": larger than the 9 bytes such a file may hold");
  // Files whose size stat does not know are bounded while read.
  auto proc = ReadFile("/proc/self/status", 1 << 20);
  ASSERT_TRUE(proc.ok()) << proc.status();
  EXPECT_NE(proc->find("Pid:"), std::string::npos);
  EXPECT_FALSE(ReadFile("/proc/self/status", 16).ok());
}

// Regression (issue 16): on a full disk the first error must say so, naming the
// file the caller wrote, and the old content must stay.
TEST_F(FileIoTest, FullDiskSaysSoAndKeepsTheOldContent) {
  testing::SmallTmpfs fs(64 << 10);
  if (!fs.ok()) GTEST_SKIP() << fs.why_not();
  const std::string path = fs.path() + "/state.bin";
  ASSERT_TRUE(WriteFileAtomic(path, "old").ok());
  fs.Fill();
  const Status s = WriteFileAtomic(path, std::string(16 << 10, 'n'));
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_EQ(s.message(), "writing " + path + ": No space left on device (ENOSPC)");
  EXPECT_EQ(*ReadFile(path, 1 << 20), "old");
  int files = 0;  // state.bin and the filler: no temporary file left behind
  for (const auto& e : std::filesystem::directory_iterator(fs.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2);
}

TEST_F(FileIoTest, MissingFileIsNotFound) {
  auto r = ReadFile((dir_ / "nope").string(), 1 << 20);
  EXPECT_TRUE(absl::IsNotFound(r.status()));
}

}  // namespace
}  // namespace easyscale
