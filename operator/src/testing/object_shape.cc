// Field types checked on the way in, as Go's JSON decoder would.
#include "object_shape.h"

#include <vector>

#include "absl/strings/str_split.h"
#include "custom_resource.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

enum class Shape { kObject, kString, kInteger, kBoolean, kArray, kStringMap };

struct FieldShape {
  const char* path;  // '/'-separated; "*" stands for every element of an array
  Shape shape;
};

// Fields of every kind, then fields of the kinds whose contents the server reads.
constexpr FieldShape kObjectMeta[] = {
    {"metadata", Shape::kObject},
    {"metadata/name", Shape::kString},
    {"metadata/generateName", Shape::kString},
    {"metadata/namespace", Shape::kString},
    {"metadata/resourceVersion", Shape::kString},
    {"metadata/uid", Shape::kString},
    {"metadata/generation", Shape::kInteger},
    {"metadata/deletionGracePeriodSeconds", Shape::kInteger},
    {"metadata/labels", Shape::kStringMap},
    {"metadata/annotations", Shape::kStringMap},
    {"metadata/finalizers", Shape::kArray},
    {"metadata/finalizers/*", Shape::kString},
    {"metadata/ownerReferences", Shape::kArray},
    {"metadata/ownerReferences/*", Shape::kObject},
    {"metadata/ownerReferences/*/uid", Shape::kString},
    {"metadata/ownerReferences/*/name", Shape::kString},
    {"metadata/ownerReferences/*/kind", Shape::kString},
    {"metadata/ownerReferences/*/apiVersion", Shape::kString},
    {"metadata/ownerReferences/*/controller", Shape::kBoolean},
};
// Custom resources leave these to their CRD's schema (422 with its causes).
constexpr FieldShape kSpecAndStatus[] = {
    {"spec", Shape::kObject},
    {"status", Shape::kObject},
};
constexpr FieldShape kPod[] = {
    {"spec/nodeName", Shape::kString},
    {"spec/terminationGracePeriodSeconds", Shape::kInteger},
    {"spec/containers", Shape::kArray},
    {"spec/containers/*", Shape::kObject},
    {"spec/containers/*/name", Shape::kString},
    {"spec/containers/*/image", Shape::kString},
    {"status/phase", Shape::kString},
};
constexpr FieldShape kSecret[] = {
    {"data", Shape::kStringMap},
    {"stringData", Shape::kStringMap},
    {"type", Shape::kString},
};
constexpr FieldShape kEvent[] = {
    {"involvedObject", Shape::kObject},
};
constexpr FieldShape kCrd[] = {
    {"spec/group", Shape::kString},
    {"spec/names", Shape::kObject},
    {"spec/names/plural", Shape::kString},
    {"spec/versions", Shape::kArray},
    {"spec/versions/*", Shape::kObject},
    {"spec/versions/*/name", Shape::kString},
    {"spec/versions/*/storage", Shape::kBoolean},
};

const char* ShapeName(Shape s) {
  switch (s) {
    case Shape::kObject:
      return "object";
    case Shape::kString:
      return "string";
    case Shape::kInteger:
      return "integer";
    case Shape::kBoolean:
      return "boolean";
    case Shape::kArray:
      return "array";
    case Shape::kStringMap:
      return "map of strings";
  }
  return "";
}

bool HasShape(const json& v, Shape s) {
  switch (s) {
    case Shape::kObject:
      return v.is_object();
    case Shape::kString:
      return v.is_string();
    case Shape::kInteger:
      return v.is_number_integer();
    case Shape::kBoolean:
      return v.is_boolean();
    case Shape::kArray:
      return v.is_array();
    case Shape::kStringMap:
      if (!v.is_object()) return false;
      for (const auto& item : v.items()) {
        if (!item.value().is_string()) return false;
      }
      return true;
  }
  return false;
}

// Checks the values at `parts[i..]` below `node`; absent fields pass, a null
// does not (the server reads these fields with a default for absent ones).
Status CheckPath(const Resource& r, const json& node, const std::vector<std::string>& parts,
                 size_t i, const std::string& at, Shape shape) {
  if (i == parts.size()) {
    if (HasShape(node, shape)) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(r.kind, " in version \"", r.version, "\" cannot be handled as a ", r.kind,
                     ": ", at, ": expected ", ShapeName(shape), ", got ", node.type_name()));
  }
  if (parts[i] == "*") {
    if (!node.is_array()) return absl::OkStatus();  // the array's own rule reports it
    for (size_t k = 0; k < node.size(); ++k) {
      Status s = CheckPath(r, node[k], parts, i + 1, absl::StrCat(at, "[", k, "]"), shape);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (!node.is_object()) return absl::OkStatus();  // the parent's own rule reports it
  auto it = node.find(parts[i]);
  if (it == node.end()) return absl::OkStatus();
  return CheckPath(r, *it, parts, i + 1, at.empty() ? parts[i] : at + "." + parts[i], shape);
}

template <size_t N>
Status CheckAll(const Resource& r, const json& obj, const FieldShape (&fields)[N]) {
  for (const FieldShape& f : fields) {
    const std::vector<std::string> parts = absl::StrSplit(f.path, '/');
    Status s = CheckPath(r, obj, parts, 0, "", f.shape);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

Status CheckObjectShape(const Resource& r, const json& obj) {
  if (!obj.is_object()) {
    return absl::FailedPreconditionError(absl::StrCat(r.kind, " in version \"", r.version,
                                                      "\" cannot be handled as a ", r.kind,
                                                      ": the body is not a JSON object"));
  }
  Status s = CheckAll(r, obj, kObjectMeta);
  if (s.ok() && CustomResourceSchema(r) == nullptr) s = CheckAll(r, obj, kSpecAndStatus);
  if (s.ok() && r.plural == "pods") s = CheckAll(r, obj, kPod);
  if (s.ok() && r.plural == "secrets") s = CheckAll(r, obj, kSecret);
  if (s.ok() && r.plural == "events") s = CheckAll(r, obj, kEvent);
  if (s.ok() && r.plural == "customresourcedefinitions") s = CheckAll(r, obj, kCrd);
  return s;
}

}  // namespace easyscale::op::testing
