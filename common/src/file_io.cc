#include "easyscale/common/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

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

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus("open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return ErrnoStatus("read", path);
  return ss.str();
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
