#include "object_shapes.h"

#include <regex>

#include "easyscale/common/checks.h"
#include "test_support.h"
#include "yaml_loader.h"

namespace easyscale::deploytest {

using nlohmann::json;

namespace {

// Replaces every {"$ref": NAME} under `node` by a copy of definition NAME;
// `depth` counts the expansions on the way down, to stop a cycle.
Status ResolveRefs(json* node, const json& definitions, int depth) {
  if (depth > 16)
    return absl::InvalidArgumentError("$ref expansions nested deeper than 16: a cycle?");
  if (node->is_object() && node->size() == 1 && node->contains("$ref")) {
    const std::string name = (*node)["$ref"];
    if (!definitions.contains(name)) return absl::InvalidArgumentError("unknown $ref " + name);
    *node = definitions[name];
    return ResolveRefs(node, definitions, depth + 1);
  }
  if (node->is_structured()) {
    for (auto& child : *node) ES_RETURN_IF_ERROR(ResolveRefs(&child, definitions, depth));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<ObjectShapes> ObjectShapes::Load(const std::string& shapes_dir) {
  json definitions = json::object();
  json kinds = json::object();
  for (const auto& path : ListFiles(shapes_dir, ".yaml")) {
    ES_ASSIGN_OR_RETURN(std::vector<json> docs, LoadYamlFile(path));
    for (const auto& doc : docs) {
      // value() returns a copy: keep it alive while iterating.
      const json file_definitions = doc.value("definitions", json::object());
      const json file_kinds = doc.value("kinds", json::object());
      for (const auto& [name, d] : file_definitions.items()) {
        if (definitions.contains(name)) {
          return absl::InvalidArgumentError(path + ": " + name + " defined twice");
        }
        definitions[name] = d;
      }
      for (const auto& [key, k] : file_kinds.items()) kinds[key] = k;
    }
  }
  if (!definitions.contains("objectMeta") || kinds.empty()) {
    return absl::InvalidArgumentError(shapes_dir + ": want definitions (objectMeta) and kinds");
  }
  ES_RETURN_IF_ERROR(ResolveRefs(&kinds, definitions, 0));
  json meta = definitions["objectMeta"];
  ES_RETURN_IF_ERROR(ResolveRefs(&meta, definitions, 0));
  ES_ASSIGN_OR_RETURN(StructuralSchema meta_schema, StructuralSchema::Create(meta));
  ObjectShapes shapes(std::move(meta_schema));
  for (const auto& [key, entry] : kinds.items()) {
    auto schema = StructuralSchema::Create(entry.at("schema"));
    if (!schema.ok()) {
      return absl::InvalidArgumentError(shapes_dir + " " + key + ": " +
                                        std::string(schema.status().message()));
    }
    shapes.kinds_.emplace(key, Kind{std::move(*schema), entry.value("scope", "") == "Namespaced"});
  }
  return shapes;
}

Status ObjectShapes::AddCustomResourceDefinition(const json& crd) {
  const json& spec = crd.at("spec");
  const std::string group = spec.at("group");
  const std::string kind = spec.at("names").at("kind");
  for (const auto& version : spec.at("versions")) {
    if (!version.value("served", false)) continue;
    const std::string key = group + "/" + version.at("name").get<std::string>() + "/" + kind;
    auto schema = StructuralSchema::Create(version.at("schema").at("openAPIV3Schema"));
    if (!schema.ok()) {
      return absl::InvalidArgumentError("CRD " + key + ": " +
                                        std::string(schema.status().message()));
    }
    schema->SetMetadataSchema(object_meta_);
    kinds_.insert_or_assign(key, Kind{std::move(*schema), spec.at("scope") == "Namespaced"});
  }
  return absl::OkStatus();
}

const StructuralSchema* ObjectShapes::Find(const std::string& api_version,
                                           const std::string& kind) const {
  const auto it = kinds_.find(api_version + "/" + kind);
  return it == kinds_.end() ? nullptr : &it->second.schema;
}

std::vector<std::string> ObjectShapes::Validate(json* object, const json* old_object) const {
  const std::string api_version = object->value("apiVersion", "");
  const std::string kind = object->value("kind", "");
  const auto it = kinds_.find(api_version + "/" + kind);
  if (it == kinds_.end()) return {"no shape for " + api_version + "/" + kind};
  std::vector<std::string> errors = it->second.schema.Validate(object, old_object);
  if (!it->second.namespaced && object->contains("metadata") &&
      (*object)["metadata"].contains("namespace")) {
    errors.push_back("metadata.namespace: Forbidden: not allowed on cluster-scoped " + kind);
  }
  for (auto& e : LabelKeyErrors(*object)) errors.push_back(std::move(e));
  return errors;
}

std::vector<std::string> LabelKeyErrors(const json& object, const std::string& path) {
  static const std::regex kName("^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$");
  static const std::regex kPrefix(
      "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
  std::vector<std::string> errors;
  if (object.is_array()) {
    for (size_t i = 0; i < object.size(); ++i) {
      for (auto& e : LabelKeyErrors(object[i], path + "[" + std::to_string(i) + "]")) {
        errors.push_back(std::move(e));
      }
    }
  }
  if (!object.is_object()) return errors;
  for (const auto& [key, value] : object.items()) {
    const std::string here = path.empty() ? key : path + "." + key;
    const bool is_label_map = key == "labels" || key == "matchLabels" || key == "nodeSelector";
    if (is_label_map && value.is_object()) {
      for (const auto& [label, unused] : value.items()) {
        const size_t slash = label.find('/');
        const std::string name = slash == std::string::npos ? label : label.substr(slash + 1);
        const std::string prefix = slash == std::string::npos ? "" : label.substr(0, slash);
        const bool ok = name.size() <= 63 && std::regex_match(name, kName) &&
                        (slash == std::string::npos ||
                         (prefix.size() <= 253 && std::regex_match(prefix, kPrefix)));
        if (!ok)
          errors.push_back(here + ": Invalid value: \"" + label + "\": not a valid label key");
      }
    }
    for (auto& e : LabelKeyErrors(value, here)) errors.push_back(std::move(e));
  }
  return errors;
}

}  // namespace easyscale::deploytest
