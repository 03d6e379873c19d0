// Volume folders, and entering a pod's namespaces.
#include "pod_sandbox.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"

namespace easyscale::op::testing {

using nlohmann::json;

StatusOr<std::vector<BindMount>> PodVolumes::Prepare(const json& pod) const {
  const std::string ns = pod["metadata"].value("namespace", "");
  const std::string name = pod["metadata"].value("name", "");
  ES_RETURN_IF_ERROR(MakeDirs(root_));       // hidden in every pod, volumes or not
  std::map<std::string, BindMount> sources;  // by volume name; no target yet
  for (const json& v : pod["spec"].value("volumes", json::array())) {
    const std::string volume = v.value("name", "");
    if (v.contains("emptyDir")) {
      sources[volume] = {.source = PodDir(ns, name) + "/" + volume};
    } else if (v.contains("persistentVolumeClaim")) {
      const json& source = v["persistentVolumeClaim"];
      const std::string claim = source.value("claimName", "");
      if (claim.empty()) return absl::InvalidArgumentError("volume " + volume + ": no claimName");
      sources[volume] = {.source = ClaimDir(ns, claim),
                         .readOnly = source.value("readOnly", false)};
    }
  }
  std::vector<BindMount> mounts;
  for (const json& m : pod["spec"]["containers"][0].value("volumeMounts", json::array())) {
    const std::string volume = m.value("name", "");
    const std::string target = m.value("mountPath", "");
    auto source = sources.find(volume);
    if (source == sources.end()) {
      return absl::InvalidArgumentError("volumeMount " + volume +
                                        ": no emptyDir or persistentVolumeClaim of that name");
    }
    if (target.empty() || target[0] != '/') {
      return absl::InvalidArgumentError("volumeMount " + volume + ": mountPath \"" + target +
                                        "\" is not absolute");
    }
    ES_RETURN_IF_ERROR(MakeDirs(source->second.source));
    ES_RETURN_IF_ERROR(MakeDirs(target));
    mounts.push_back({.source = source->second.source,
                      .target = target,
                      .readOnly = source->second.readOnly || m.value("readOnly", false)});
  }
  return mounts;
}

std::string PodVolumes::ClaimDir(const std::string& ns, const std::string& claimName) const {
  return root_ + "/claims/" + ns + "/" + claimName;
}

std::string PodVolumes::PodDir(const std::string& ns, const std::string& pod) const {
  return root_ + "/pods/" + ns + "/" + pod;
}

void PodVolumes::Release(const std::string& ns, const std::string& pod) const {
  std::error_code ignored;
  std::filesystem::remove_all(PodDir(ns, pod), ignored);
}

StatusOr<SandboxEntry> SandboxEntry::Open(PodSandbox sandbox) {
  const int fd = ::open(sandbox.netns.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError("open network namespace " + sandbox.netns + ": " +
                               std::strerror(errno));
  }
  return SandboxEntry(fd, std::move(sandbox));
}

SandboxEntry::SandboxEntry(SandboxEntry&& other) noexcept
    : netns_(std::exchange(other.netns_, -1)), sandbox_(std::move(other.sandbox_)) {}

SandboxEntry::~SandboxEntry() {
  if (netns_ >= 0) ::close(netns_);
}

int SandboxEntry::Enter() const {
  if (::setns(netns_, CLONE_NEWNET) != 0) return errno;
  if (::unshare(CLONE_NEWNS) != 0) return errno;
  // Private first, so that the mounts below do not propagate to the host.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  for (const BindMount& m : sandbox_.mounts) {
    if (::mount(m.source.c_str(), m.target.c_str(), nullptr, MS_BIND, nullptr) != 0) return errno;
    // A bind mount takes MS_RDONLY only on a remount of itself.
    if (m.readOnly && ::mount(nullptr, m.target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY,
                              nullptr) != 0) {
      return errno;
    }
  }
  if (!sandbox_.hiddenDir.empty() &&
      ::mount("tmpfs", sandbox_.hiddenDir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=64k,mode=0755") != 0) {
    return errno;
  }
  return 0;
}

}  // namespace easyscale::op::testing
