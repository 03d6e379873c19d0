#include "easyscale/common/job_volumes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/job_spec.h"
#include "easyscale/common/json_fields.h"

namespace easyscale {

bool IsNormalAbsolutePath(std::string_view path) {
  if (path.size() < 2 || path.size() > kMaxVolumePathLength || path[0] != '/') return false;
  for (size_t start = 1; start <= path.size();) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

namespace {

// `inner` is `outer` or lies below it; both are normal absolute paths, so a
// prefix ending at a component boundary is containment.
bool PathIsWithin(std::string_view inner, std::string_view outer) {
  return inner.substr(0, outer.size()) == outer &&
         (inner.size() == outer.size() || inner[outer.size()] == '/');
}

bool PathsOverlap(std::string_view a, std::string_view b) {
  return PathIsWithin(a, b) || PathIsWithin(b, a);
}

const char kNormalPathRule[] =
    "must be an absolute path without empty, \".\" or \"..\" components or a trailing slash";

StatusOr<JobVolume> ParseJobVolume(const nlohmann::json& item, const std::string& path) {
  JobVolume v;
  FieldReader r(item, path);
  r.String("name", &v.name, /*required=*/true);
  r.String("claimName", &v.claimName, /*required=*/true);
  r.String("mountPath", &v.mountPath, /*required=*/true);
  r.Bool("readOnly", &v.readOnly);
  if (r.ok()) {
    for (const auto& [key, value] : item.items()) {
      if (key != "name" && key != "claimName" && key != "mountPath" && key != "readOnly") {
        r.Fail(key, "unknown field");
      }
    }
  }
  if (r.ok() && !IsDns1123Label(v.name)) r.Fail("name", "not a DNS-1123 label");
  if (r.ok() && (v.name == kShmVolumeName || v.name == kCheckpointVolumeName)) {
    r.Fail("name", "\"" + v.name + "\" is the operator's own volume");
  }
  if (r.ok() && !IsDns1123Subdomain(v.claimName)) r.Fail("claimName", "not a DNS-1123 subdomain");
  if (r.ok() && !IsNormalAbsolutePath(v.mountPath)) r.Fail("mountPath", kNormalPathRule);
  ES_RETURN_IF_ERROR(r.status());
  return v;
}

}  // namespace

StatusOr<std::vector<JobVolume>> ParseJobVolumes(
    const nlohmann::json& list, const std::string& path,
    const std::vector<std::string>& operatorMountPaths) {
  if (!list.is_array()) return absl::InvalidArgumentError(path + ": must be a list");
  if (list.size() > kMaxJobVolumes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": at most ", kMaxJobVolumes, " volumes, got ", list.size()));
  }
  std::vector<JobVolume> volumes;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item = absl::StrCat(path, "[", i, "]");
    ES_ASSIGN_OR_RETURN(JobVolume v, ParseJobVolume(list[i], item));
    auto fail = [&](const std::string& field, const std::string& message) {
      return absl::InvalidArgumentError(item + "." + field + ": " + message);
    };
    for (size_t k = 0; k < volumes.size(); ++k) {
      if (volumes[k].name == v.name) {
        return fail("name", absl::StrCat("\"", v.name, "\" is also ", path, "[", k, "]'s name"));
      }
      if (PathsOverlap(volumes[k].mountPath, v.mountPath)) {
        return fail("mountPath", absl::StrCat("\"", v.mountPath, "\" overlaps ", path, "[", k,
                                              "].mountPath \"", volumes[k].mountPath, "\""));
      }
    }
    for (const std::string& own : operatorMountPaths) {
      if (PathsOverlap(own, v.mountPath)) {
        return fail("mountPath", "\"" + v.mountPath + "\" overlaps the operator's mount at " + own);
      }
    }
    volumes.push_back(std::move(v));
  }
  return volumes;
}

Status CheckPathsInVolumes(const std::vector<VolumePath>& paths,
                           const std::vector<JobVolume>& volumes, const std::string& volumesField) {
  for (const VolumePath& p : paths) {
    auto fail = [&](const std::string& message) {
      return absl::InvalidArgumentError(p.field + ": \"" + p.path + "\" " + message);
    };
    if (!IsNormalAbsolutePath(p.path)) return fail(kNormalPathRule);
    const JobVolume* holder = nullptr;
    for (const JobVolume& v : volumes) {
      if (PathIsWithin(p.path, v.mountPath)) holder = &v;  // mounts never overlap: one at most
    }
    if (holder == nullptr) {
      std::vector<std::string> mounts;
      for (const JobVolume& v : volumes) mounts.push_back(v.mountPath);
      return fail("is in none of the job's volumes (" + volumesField + ": " +
                  (mounts.empty() ? std::string("none") : absl::StrJoin(mounts, ", ")) + ")");
    }
    if (p.needsWritable && holder->readOnly) {
      return fail("is on read-only volume \"" + holder->name + "\"; it needs a writable one");
    }
  }
  return absl::OkStatus();
}

}  // namespace easyscale
