#include "easyscale/common/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "easyscale/common/checks.h"

namespace easyscale {
namespace {

// "<what>: No space left on device (ENOSPC)"; the code says whether to retry.
Status ErrnoStatus(int err, const std::string& what) {
  const char* name = strerrorname_np(err);
  const std::string msg = absl::StrCat(what, ": ", std::strerror(err), " (",
                                       name != nullptr ? name : std::to_string(err), ")");
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  if (err == ENOSPC) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

// The same for errno, after "<doing> <path>".
Status ErrnoStatus(const std::string& doing, const std::string& path) {
  const int err = errno;
  return ErrnoStatus(err, doing + " " + path);
}

Status TooLarge(const std::string& path, size_t max_bytes) {
  return absl::FailedPreconditionError(absl::StrCat("reading ", path, ": larger than the ",
                                                    max_bytes, " bytes such a file may hold"));
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
      return ErrnoStatus("writing", path);
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

StatusOr<std::string> ReadTokenFile(const std::string& path) {
  ES_ASSIGN_OR_RETURN(std::string token, ReadFile(path, size_t{1} << 20));
  return std::string(absl::StripAsciiWhitespace(token));
}

Status WriteFileAtomic(const std::string& path, std::string_view content) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return ErrnoStatus("creating a temporary file beside", path);
  // Every step is checked, and the first error names the target (the file the
  // caller knows) and the errno, e.g. ENOSPC on a full disk; the temporary
  // file goes and the target keeps its old content.
  Status st;
  if (::fchmod(fd, 0644) != 0) st = ErrnoStatus("writing", path);  // mkstemp makes 0600
  if (st.ok()) st = WriteAll(fd, content, path);
  if (st.ok() && ::fsync(fd) != 0) st = ErrnoStatus("syncing", path);
  if (::close(fd) != 0 && st.ok()) st = ErrnoStatus("closing", path);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoStatus("renaming to", path);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  // The rename is durable only once the folder entry is on disk.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoStatus("syncing the folder of", path);
  if (::fsync(dfd) != 0) st = ErrnoStatus("syncing the folder of", path);
  ::close(dfd);
  return st;
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return ErrnoStatus(ec.value(), "creating folder " + path);
  if (!std::filesystem::is_directory(path)) {
    return absl::FailedPreconditionError(path + " exists and is not a folder");
  }
  return absl::OkStatus();
}

}  // namespace easyscale
