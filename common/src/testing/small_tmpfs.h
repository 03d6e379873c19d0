// File: common/src/testing/small_tmpfs.h
//
// A tmpfs of a few pages, mounted for one test that needs a full disk (the
// ENOSPC paths). Mounting needs root; the mount lives in a mount namespace of
// the test process's own, so it goes away with the process, even one that
// crashes, and no other process sees it.
//   SmallTmpfs fs(64 << 10);
//   if (!fs.ok()) GTEST_SKIP() << fs.why_not();
//   ... write the state to keep under fs.path() ...
//   fs.Fill();  // from here on, writing any data fails with ENOSPC
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace easyscale::testing {

class SmallTmpfs {
 public:
  explicit SmallTmpfs(size_t bytes) {
    if (::geteuid() != 0) {
      why_not_ = "mounting a tmpfs needs root";
      return;
    }
    if (const std::string& e = OwnMountNamespace(); !e.empty()) {
      why_not_ = e;
      return;
    }
    std::string tmpl = (std::filesystem::temp_directory_path() / "es-tmpfs-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      why_not_ = std::string("mkdtemp: ") + std::strerror(errno);
      return;
    }
    const std::string options = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", tmpl.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      why_not_ = std::string("mount tmpfs: ") + std::strerror(errno);
      ::rmdir(tmpl.c_str());
      return;
    }
    path_ = tmpl;
  }
  ~SmallTmpfs() {
    if (path_.empty()) return;
    ::umount2(path_.c_str(), MNT_DETACH);
    ::rmdir(path_.c_str());
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& why_not() const { return why_not_; }
  const std::string& path() const { return path_; }

  // Writes a filler file until the file system has no page left.
  void Fill() const {
    const int fd = ::open((path_ + "/filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    const std::string page(4096, 'x');
    while (::write(fd, page.data(), page.size()) > 0) {
    }
    ::close(fd);
  }

 private:
  // Moves this process into a mount namespace of its own, once; returns why
  // that failed, or "".
  static const std::string& OwnMountNamespace() {
    static const std::string error = [] {
      if (::unshare(CLONE_NEWNS) != 0) return std::string("unshare: ") + std::strerror(errno);
      // Private, so that no mount made here reaches the parent namespace.
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        return std::string("make / private: ") + std::strerror(errno);
      }
      return std::string();
    }();
    return error;
  }

  std::string path_;
  std::string why_not_;
};

}  // namespace easyscale::testing
