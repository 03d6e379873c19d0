#include "easyscale/common/dir_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "easyscale/common/file_io.h"
#include "easyscale/common/subprocess.h"

namespace easyscale {
namespace {

using namespace std::chrono_literals;

class DirLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("es-dirlock-" + std::to_string(getpid())))
               .string();
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(MakeDirs(dir_).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DirLockTest, ASecondOwnerFailsNamingTheFolderAndTheHolder) {
  {
    StatusOr<DirLock> first = DirLock::Acquire(dir_);
    ASSERT_TRUE(first.ok()) << first.status();
    StatusOr<DirLock> second = DirLock::Acquire(dir_);
    ASSERT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
    const std::string message(second.status().message());
    EXPECT_NE(message.find(dir_ + " is in use by another run"), std::string::npos) << message;
    EXPECT_NE(message.find("(pid " + std::to_string(getpid()) + ")"), std::string::npos) << message;
  }
  EXPECT_TRUE(DirLock::Acquire(dir_).ok());  // released with its holder
}

TEST_F(DirLockTest, AChildKeepingTheDescriptorHoldsTheLockUntilItEnds) {
  std::optional<Subprocess> child;
  {
    StatusOr<DirLock> lock = DirLock::Acquire(dir_);
    ASSERT_TRUE(lock.ok()) << lock.status();
    StatusOr<Subprocess> started =
        Subprocess::Start({.argv = {"sleep", "30"}, .keepFds = {lock->fd()}});
    ASSERT_TRUE(started.ok()) << started.status();
    child = std::move(*started);
  }
  EXPECT_TRUE(absl::IsFailedPrecondition(DirLock::Acquire(dir_).status()));
  child->WaitOrKill(0ms);
  EXPECT_TRUE(DirLock::Acquire(dir_).ok());
}

TEST_F(DirLockTest, AMissingFolderIsAnError) {
  StatusOr<DirLock> lock = DirLock::Acquire(dir_ + "/missing");
  EXPECT_FALSE(lock.ok());
  EXPECT_NE(lock.status().message().find(dir_ + "/missing"), std::string::npos);
}

}  // namespace
}  // namespace easyscale
