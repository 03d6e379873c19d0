// Custom resources checked against the served CRD, in kube-apiserver's order.
#include "custom_resource.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api_answers.h"
#include "served_crd.h"

namespace easyscale::op::testing {

using nlohmann::json;
using schematest::StructuralSchema;

namespace {

// The served CRD's schema, read once; an error when it has no version for
// kEasyScaleJobs or uses what the validator cannot check (a CEL rule without
// an implementation, an unknown keyword).
const StatusOr<StructuralSchema>& ServedSchema() {
  static const StatusOr<StructuralSchema> schema = [] {
    const json& version = ServedCrdVersion(kEasyScaleJobs);
    if (version.is_null()) return StatusOr<StructuralSchema>(absl::InternalError("no CRD"));
    StatusOr<StructuralSchema> s = StructuralSchema::Create(version["schema"]["openAPIV3Schema"]);
    // The server reads ObjectMeta itself (name, namespace, labels...): the
    // schema's `metadata: {type: object}` neither prunes nor checks it.
    static const StatusOr<StructuralSchema> meta = StructuralSchema::Create(
        {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}});
    if (s.ok()) s->SetMetadataSchema(*meta);
    return s;
  }();
  return schema;
}

}  // namespace

Status CheckServedCrdSchema() { return ServedSchema().status(); }

const StructuralSchema* CustomResourceSchema(const Resource& r) {
  const Resource& served = kEasyScaleJobs;
  if (r.group != served.group || r.version != served.version || r.plural != served.plural) {
    return nullptr;
  }
  return ServedSchema().ok() ? &*ServedSchema() : nullptr;
}

StatusOr<std::vector<FieldError>> DecodeCustomResource(const ResourceInfo& r, json* obj,
                                                       const json* old, bool statusOnly,
                                                       FieldValidation fieldValidation,
                                                       std::vector<std::string>* warnings) {
  const StructuralSchema* schema = CustomResourceSchema(r.resource);
  if (schema == nullptr) return std::vector<FieldError>();
  schematest::SchemaResult result = schema->Prune(obj, old, statusOnly ? "status" : "");
  std::vector<std::string> unknown;
  for (const std::string& path : result.pruned) {
    unknown.push_back("unknown field \"" + path + "\"");
  }
  if (!unknown.empty() && fieldValidation == FieldValidation::kStrict) {
    return absl::FailedPreconditionError(absl::StrCat(
        r.resource.kind, " in version \"", r.resource.version, "\" cannot be handled as a ",
        r.resource.kind, ": strict decoding error: ", absl::StrJoin(unknown, ", ")));
  }
  if (fieldValidation == FieldValidation::kWarn && warnings != nullptr) {
    warnings->insert(warnings->end(), unknown.begin(), unknown.end());
  }
  return std::move(result.errors);
}

Status InvalidObject(const Resource& r, const std::string& name,
                     const std::vector<FieldError>& errors) {
  std::vector<std::string> shown;
  json causes = json::array();
  for (const FieldError& e : errors) {
    shown.push_back(e.ToString());
    causes.push_back({{"reason", e.reason}, {"message", e.message}, {"field", e.field}});
  }
  const std::string kind = r.group.empty() ? r.kind : r.kind + "." + r.group;
  const std::string why = shown.size() == 1 ? shown[0] : "[" + absl::StrJoin(shown, ", ") + "]";
  json details = {{"name", name}, {"kind", r.kind}, {"causes", causes}};
  if (!r.group.empty()) details["group"] = r.group;
  return WithStatusDetails(
      absl::InvalidArgumentError(absl::StrCat(kind, " \"", name, "\" is invalid: ", why)), details);
}

}  // namespace easyscale::op::testing
