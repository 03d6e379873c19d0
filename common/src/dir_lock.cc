// flock(2) on <dir>/LOCK.
#include "easyscale/common/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace easyscale {
namespace {

// The pid the holder wrote, or "" when it has not (yet).
std::string HolderPid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  int pid = 0;
  if (n <= 0 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(buf), &pid) || pid <= 0) return "";
  return std::to_string(pid);
}

}  // namespace

StatusOr<DirLock> DirLock::Acquire(const std::string& dir) {
  const std::string path = dir + "/LOCK";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError("lock " + dir + ": open " + path + ": " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = HolderPid(fd);
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return absl::InternalError("lock " + path + ": " + std::strerror(err));
    }
    return absl::FailedPreconditionError("folder " + dir + " is in use by another run" +
                                         (holder.empty() ? "" : " (pid " + holder + ")") +
                                         "; one run owns it at a time");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError("lock " + path + ": write pid: " + std::strerror(err));
  }
  return DirLock(fd);
}

DirLock::DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace easyscale
