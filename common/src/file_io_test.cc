#include "easyscale/common/file_io.h"

#include <gtest/gtest.h>

#include <filesystem>

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
  auto content = ReadFile(path);
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
  EXPECT_EQ(*ReadFile(path), "old");
}

TEST_F(FileIoTest, MissingFileIsNotFound) {
  auto r = ReadFile((dir_ / "nope").string());
  EXPECT_TRUE(absl::IsNotFound(r.status()));
}

}  // namespace
}  // namespace easyscale
