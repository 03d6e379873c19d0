#include "easyscale/common/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "easyscale/common/checks.h"

namespace easyscale {
namespace {

Status ErrnoStatus(const std::string& what, const std::string& path) {
  const int err = errno;
  std::string msg = what + " " + path + ": " + std::strerror(err);
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  if (err == ENOSPC) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

Status TooLarge(const std::string& path, size_t max_bytes) {
  return absl::FailedPreconditionError(
      absl::StrCat("reading ", path, ": larger than the ", max_bytes, " bytes such a file may hold"));
}

// Only regular files are read: a FIFO or a device (/dev/zero) never ends, a
// folder is no file.
Status CheckReadable(const struct stat& st, const std::string& path, size_t max_bytes) {
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a folder"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a special file";
    return absl::FailedPreconditionError(
        absl::StrCat("reading ", path, ": is ", kind, ", not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return TooLarge(path, max_bytes);
  return absl::OkStatus();
}

Status WriteAll(int fd, std::string_view content, const std::string& path) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  // stat first: opening a FIFO blocks and opening some devices acts.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("opening", path);
  ES_RETURN_IF_ERROR(CheckReadable(st, path, max_bytes));
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("opening", path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // The path may have been replaced between stat and open.
  if (::fstat(fd, &st) != 0) return ErrnoStatus("opening", path);
  ES_RETURN_IF_ERROR(CheckReadable(st, path, max_bytes));
  std::string content;
  content.reserve(static_cast<size_t>(st.st_size));
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("reading", path);
    if (n == 0) return content;
    // Files whose size stat does not know (/proc) or that grow while read.
    if (content.size() + static_cast<size_t>(n) > max_bytes) return TooLarge(path, max_bytes);
    content.append(chunk, static_cast<size_t>(n));
  }
}

Status WriteFileAtomic(const std::string& path, std::string_view content) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string tmp_template = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmp_template.data());
  if (fd < 0) return ErrnoStatus("create temporary file for", path);
  ::fchmod(fd, 0644);  // mkstemp creates 0600; these files are shared data
  Status st = WriteAll(fd, content, tmp_template);
  if (st.ok() && ::fsync(fd) != 0) st = ErrnoStatus("fsync", tmp_template);
  if (::close(fd) != 0 && st.ok()) st = ErrnoStatus("close", tmp_template);
  if (st.ok() && ::rename(tmp_template.c_str(), path.c_str()) != 0)
    st = ErrnoStatus("rename", path);
  if (!st.ok()) {
    ::unlink(tmp_template.c_str());
    return st;
  }
  // The rename is durable only once the folder entry is on disk.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return absl::InternalError("create folder " + path + ": " + ec.message());
  if (!std::filesystem::is_directory(path)) {
    return absl::FailedPreconditionError(path + " exists and is not a folder");
  }
  return absl::OkStatus();
}

}  // namespace easyscale
