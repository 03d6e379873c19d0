// File: easyscale/common/job_volumes.h
//
// The volumes a job mounts into every worker pod (spec.worker.volumes):
// PersistentVolumeClaims that hold the user's model, data and trained output,
// and the rule that every path a job names lies inside one of them.
//
//   StatusOr<std::vector<JobVolume>> v =
//       ParseJobVolumes(j["volumes"], "spec.worker.volumes", {kShmMountPath});
//   ES_RETURN_IF_ERROR(CheckPathsInVolumes(
//       {{"spec.training.modelFile", modelFile, /*needsWritable=*/false}}, *v,
//       "spec.worker.volumes"));   // "spec.training.modelFile: "/x.onnx" is in none of ..."
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale {

// One claim mounted at the same path in every worker pod. readOnly is
// honoured twice, as Kubernetes users expect: in the pod's
// persistentVolumeClaim source and in the container's volumeMount.
struct JobVolume {
  std::string name;       // the pod's volume name: a DNS-1123 label
  std::string claimName;  // a PersistentVolumeClaim in the job's namespace
  std::string mountPath;  // absolute and normalised (IsNormalAbsolutePath)
  bool readOnly = false;
  bool operator==(const JobVolume&) const = default;
};

inline constexpr size_t kMaxJobVolumes = 16;
// Bounds mount paths and the paths inside them (the CRD's CEL rules need one).
inline constexpr size_t kMaxVolumePathLength = 1024;

// The operator's own mounts in every worker pod; a job's volumes keep off
// their names and paths.
inline constexpr const char* kShmVolumeName = "shm";
inline constexpr const char* kShmMountPath = "/dev/shm";
inline constexpr const char* kCheckpointVolumeName = "checkpoint";

// "/a/b": absolute, not "/" itself, no empty, "." or ".." component, no
// trailing slash, at most kMaxVolumePathLength. Containment is a plain prefix
// test only on such paths, so none can climb out of a volume.
bool IsNormalAbsolutePath(std::string_view path);

// Parses the list at `path` ("spec.worker.volumes"): at most kMaxJobVolumes,
// unique DNS-1123 label names other than the operator's, DNS-1123 claim
// names, normal absolute mount paths that neither overlap each other (equal
// or nested) nor `operatorMountPaths` (/dev/shm, the checkpoint claim's).
// Errors name the item's field ("spec.worker.volumes[1].mountPath").
StatusOr<std::vector<JobVolume>> ParseJobVolumes(
    const nlohmann::json& list, const std::string& path,
    const std::vector<std::string>& operatorMountPaths);

// A path a job names in its spec, to be found in its volumes.
struct VolumePath {
  std::string field;  // as errors name it: "spec.training.modelFile"
  std::string path;
  bool needsWritable = false;  // the worker writes there (the trained model)
};

// Each path must be a normal absolute path at or below the mountPath of
// one of `volumes` (`volumesField` names them in errors), a writable one when
// it needs writing. The first bad path fails, naming its field.
Status CheckPathsInVolumes(const std::vector<VolumePath>& paths,
                           const std::vector<JobVolume>& volumes, const std::string& volumesField);

}  // namespace easyscale
