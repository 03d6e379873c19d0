// File: easyscale/common/dir_lock.h
//
// One owner for a folder at a time: an exclusive flock(2) on <dir>/LOCK, held
// while the DirLock lives. The kernel drops it when the holder ends, however
// it ends, so a crash never leaves the folder locked. The holder writes its
// pid into the file, for the error a second owner gets.
//   StatusOr<DirLock> lock = DirLock::Acquire(checkpoint_dir);
//   if (!lock.ok()) return lock.status();  // "... is in use by another run (pid 4242)"
#pragma once

#include <string>

#include "easyscale/common/status.h"

namespace easyscale {

class DirLock {
 public:
  // Does not wait: FailedPrecondition naming the folder, and the holder's pid
  // when known, while another holds it.
  static StatusOr<DirLock> Acquire(const std::string& dir);

  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&& other) noexcept;
  ~DirLock();

  // The locked descriptor (close-on-exec). A child that keeps it open
  // (SubprocessOptions::keepFds) holds the lock with us until it exits too.
  int fd() const { return fd_; }

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace easyscale
