// File: tests/operator/pod_sandbox.h
//
// A pod's own view of the machine, entered by its container's process between
// fork and exec: the pod's network namespace, and a mount namespace of its own
// (private, so nothing leaks to the host) where each volume's mountPath is
// bound to the pod's folder for it (emptyDir: private to the pod;
// persistentVolumeClaim: one per namespace and claim, shared by the pods that
// mount it; read-only, as kubelet mounts it, when the volumeMount or the
// claim's source says readOnly) and the folder holding every pod's volumes is
// hidden.
//
//   PodVolumes volumes(dir + "/volumes");
//   PodSandbox sandbox{.netns = pod.netns, .mounts = *volumes.Prepare(podJson),
//                      .hiddenDir = volumes.root()};
//   StatusOr<SandboxEntry> entry = SandboxEntry::Open(sandbox);
//   Subprocess::Start({..., .beforeExec = [&e = *entry] { return e.Enter(); }});
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::op::testing {

struct BindMount {
  std::string source;  // a folder on the host
  std::string target;  // the volume's mountPath
  bool readOnly = false;
};

struct PodSandbox {
  std::string netns;  // a network namespace's path
  std::vector<BindMount> mounts;
  std::string hiddenDir;  // covered by an empty tmpfs
};

// The pods' volume folders on the host: <root>/pods/<ns>/<pod>/<volume> for
// an emptyDir, <root>/claims/<ns>/<claimName> for a persistentVolumeClaim.
class PodVolumes {
 public:
  explicit PodVolumes(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  // The folder that stands for claim `claimName` of namespace `ns` (a test
  // fills it, as a user fills a PersistentVolume).
  std::string ClaimDir(const std::string& ns, const std::string& claimName) const;

  // Creates the folders of the volumes the pod's first container mounts, and
  // missing mount points. Those stay, empty: removing one would unmount it in
  // the pods of another test process that mounts the same path.
  StatusOr<std::vector<BindMount>> Prepare(const nlohmann::json& pod) const;
  // The pod's own folder, holding its emptyDirs (deleted with the pod).
  std::string PodDir(const std::string& ns, const std::string& pod) const;
  // A deleted pod's emptyDirs go; claims stay.
  void Release(const std::string& ns, const std::string& pod) const;

 private:
  std::string root_;
};

// What entering a sandbox needs, opened before fork.
class SandboxEntry {
 public:
  static StatusOr<SandboxEntry> Open(PodSandbox sandbox);
  SandboxEntry(SandboxEntry&& other) noexcept;
  SandboxEntry& operator=(SandboxEntry&&) = delete;
  ~SandboxEntry();

  // In the child, between fork and exec: async-signal-safe calls only.
  // Returns 0, or the errno of the step that failed.
  int Enter() const;

 private:
  SandboxEntry(int netns, PodSandbox sandbox) : netns_(netns), sandbox_(std::move(sandbox)) {}
  int netns_ = -1;
  PodSandbox sandbox_;
};

}  // namespace easyscale::op::testing
