#include "structural_schema.h"

#include <cmath>
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cel_rules.h"
#include "easyscale/common/checks.h"

namespace easyscale::schematest {
namespace {

using nlohmann::json;

const std::set<std::string>& KnownKeywords() {
  static const std::set<std::string> kKeywords = {"type",
                                                  "description",
                                                  "title",
                                                  "example",
                                                  "format",
                                                  "default",
                                                  "nullable",
                                                  "enum",
                                                  "properties",
                                                  "required",
                                                  "additionalProperties",
                                                  "items",
                                                  "minimum",
                                                  "maximum",
                                                  "exclusiveMinimum",
                                                  "exclusiveMaximum",
                                                  "minLength",
                                                  "maxLength",
                                                  "pattern",
                                                  "minItems",
                                                  "maxItems",
                                                  "minProperties",
                                                  "maxProperties",
                                                  "x-kubernetes-preserve-unknown-fields",
                                                  "x-kubernetes-int-or-string",
                                                  "x-kubernetes-validations",
                                                  "x-kubernetes-list-type",
                                                  "x-kubernetes-list-map-keys",
                                                  "x-kubernetes-map-type",
                                                  "x-kubernetes-embedded-resource"};
  return kKeywords;
}

const std::set<std::string>& KnownTypes() {
  static const std::set<std::string> kTypes = {"object",  "array",  "string",
                                               "integer", "number", "boolean"};
  return kTypes;
}

bool Flag(const json& s, const char* key) { return s.value(key, false); }

Status CheckSchemaNode(const json& s, const std::string& path) {
  if (!s.is_object()) return absl::InvalidArgumentError(path + ": schema must be an object");
  for (const auto& [key, value] : s.items()) {
    if (!KnownKeywords().count(key)) {
      return absl::InvalidArgumentError(path + ": unknown schema keyword \"" + key + "\"");
    }
  }
  const bool int_or_string = Flag(s, "x-kubernetes-int-or-string");
  const bool preserve = Flag(s, "x-kubernetes-preserve-unknown-fields");
  if (!s.contains("type") && !int_or_string && !preserve) {
    return absl::InvalidArgumentError(path + ": must have a type (structural schema)");
  }
  if (s.contains("type") && !KnownTypes().count(s["type"].get<std::string>())) {
    return absl::InvalidArgumentError(path + ": unknown type " + s["type"].dump());
  }
  if (s.contains("properties") && s.contains("additionalProperties")) {
    return absl::InvalidArgumentError(path +
                                      ": properties and additionalProperties exclude each other");
  }
  for (const auto& v : s.value("x-kubernetes-validations", json::array())) {
    const std::string rule = v.value("rule", "");
    if (!IsKnownCelRule(rule)) {
      return absl::UnimplementedError(path + ": no implementation of CEL rule \"" + rule +
                                      "\" in common/src/testing/cel_rules.cc");
    }
  }
  for (const auto& name : s.value("required", json::array())) {
    if (!s.contains("properties") || !s["properties"].contains(name.get<std::string>())) {
      return absl::InvalidArgumentError(path + ": required " + name.dump() + " is not a property");
    }
  }
  if (s.contains("properties")) {
    for (const auto& [name, sub] : s["properties"].items()) {
      ES_RETURN_IF_ERROR(CheckSchemaNode(sub, path + ".properties." + name));
    }
  }
  if (s.contains("items")) ES_RETURN_IF_ERROR(CheckSchemaNode(s["items"], path + ".items"));
  if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
    ES_RETURN_IF_ERROR(CheckSchemaNode(s["additionalProperties"], path + ".additionalProperties"));
  }
  return absl::OkStatus();
}

std::string JsonType(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_boolean()) return "boolean";
  return v.type_name();  // string, object, array, null
}

// The API server prints objects and arrays by their type, scalars as JSON.
std::string Shown(const json& v) {
  if (v.is_object() || v.is_array()) return "\"" + JsonType(v) + "\"";
  return v.dump();
}

bool IsWholeNumber(const json& v) {
  return v.is_number_float() && std::isfinite(v.get<double>()) &&
         std::floor(v.get<double>()) == v.get<double>();
}

bool TypeMatches(const std::string& want, const json& v) {
  if (want == "integer") return v.is_number_integer() || IsWholeNumber(v);
  if (want == "number") return v.is_number();
  return JsonType(v) == want;
}

bool IsDateTime(const std::string& s) {
  static const std::regex kRfc3339(
      "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt "
      "][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$");
  return std::regex_match(s, kRfc3339);
}

class Validator {
 public:
  // With `pruned`, unknown fields are removed and listed there; without, each
  // is an error.
  Validator(const json& metadata_schema, std::vector<FieldError>* errors,
            std::vector<std::string>* pruned)
      : metadata_schema_(metadata_schema), errors_(errors), pruned_(pruned) {}

  void Node(json* v, const json& s, const std::string& path, const json* old) {
    const size_t errors_before = errors_->size();
    Fail fail{this, path};
    // Type errors show the value's type, as the API server does; enum is
    // still checked, the rest would only repeat the same mistake.
    const json type_name = JsonType(*v);
    if (Flag(s, "x-kubernetes-int-or-string")) {
      if (!v->is_number_integer() && !v->is_string()) {
        fail.Invalid(type_name, "must be of type int-or-string: " + type_name.dump(),
                     "FieldValueTypeInvalid");
        return Enum(*v, s, fail);
      }
    } else if (s.contains("type")) {
      const std::string want = s["type"];
      if (!TypeMatches(want, *v)) {
        fail.Invalid(type_name, "must be of type " + want + ": " + type_name.dump(),
                     "FieldValueTypeInvalid");
        return Enum(*v, s, fail);
      }
      if (want == "integer" && IsWholeNumber(*v)) *v = static_cast<int64_t>(v->get<double>());
    }
    Enum(*v, s, fail);
    if (v->is_number()) Range(*v, s, fail);
    if (v->is_string()) StringChecks(v->get_ref<const std::string&>(), s, fail);
    if (v->is_object()) Object(v, s, path, old);
    if (v->is_array()) Array(v, s, path, old);
    if (errors_->size() == errors_before) CelRules(*v, s, path, old);
  }

 private:
  // Formats "<path>: Invalid value: <v>: <path> in body <what>".
  struct Fail {
    Validator* self;
    const std::string& path;
    void Invalid(const json& v, const std::string& what,
                 const char* reason = "FieldValueInvalid") const {
      self->errors_->push_back(
          {reason, path, "Invalid value: " + Shown(v) + ": " + path + " in body " + what});
    }
  };

  void Enum(const json& v, const json& s, const Fail& fail) {
    if (!s.contains("enum")) return;
    for (const auto& allowed : s["enum"]) {
      if (allowed == v) return;
    }
    std::vector<std::string> shown;
    for (const auto& allowed : s["enum"]) shown.push_back(allowed.dump());
    errors_->push_back(
        {"FieldValueNotSupported", fail.path,
         "Unsupported value: " + Shown(v) + ": supported values: " + absl::StrJoin(shown, ", ")});
  }

  void Range(const json& v, const json& s, const Fail& fail) {
    const double x = v.get<double>();
    if (s.contains("minimum")) {
      const double min = s["minimum"].get<double>();
      if (Flag(s, "exclusiveMinimum") ? !(x > min) : x < min) {
        fail.Invalid(v, std::string("should be greater than ") +
                            (Flag(s, "exclusiveMinimum") ? "" : "or equal to ") +
                            s["minimum"].dump());
      }
    }
    if (s.contains("maximum")) {
      const double max = s["maximum"].get<double>();
      if (Flag(s, "exclusiveMaximum") ? !(x < max) : x > max) {
        fail.Invalid(v, std::string("should be less than ") +
                            (Flag(s, "exclusiveMaximum") ? "" : "or equal to ") +
                            s["maximum"].dump());
      }
    }
  }

  void StringChecks(const std::string& str, const json& s, const Fail& fail) {
    const json v = str;
    if (s.contains("minLength") && str.size() < s["minLength"].get<size_t>()) {
      fail.Invalid(
          v, absl::StrCat("should be at least ", s["minLength"].get<size_t>(), " chars long"));
    }
    if (s.contains("maxLength") && str.size() > s["maxLength"].get<size_t>()) {
      fail.Invalid(v,
                   absl::StrCat("should be at most ", s["maxLength"].get<size_t>(), " chars long"));
    }
    // Go's regexp.MatchString finds a match anywhere, as regex_search does.
    if (s.contains("pattern") &&
        !std::regex_search(str, std::regex(s["pattern"].get<std::string>()))) {
      fail.Invalid(v, "should match '" + s["pattern"].get<std::string>() + "'");
    }
    if (s.value("format", "") == "date-time" && !IsDateTime(str)) {
      fail.Invalid(v, "must be of type date-time: " + v.dump());
    }
  }

  void Object(json* v, const json& s, const std::string& path, const json* old) {
    const std::string prefix = path.empty() ? "" : path + ".";
    // Unknown fields are pruned (when pruning), then nulls of non-nullable
    // fields, before defaulting.
    const bool preserve = Flag(s, "x-kubernetes-preserve-unknown-fields");
    for (auto it = v->begin(); it != v->end();) {
      const json* sub = PropertySchema(s, it.key(), path);
      if (sub == nullptr && !preserve && pruned_ != nullptr) {
        pruned_->push_back(prefix + it.key());
        it = v->erase(it);
      } else if (it->is_null() && !(sub != nullptr && Flag(*sub, "nullable"))) {
        it = v->erase(it);
      } else {
        ++it;
      }
    }
    if (s.contains("properties")) {
      for (const auto& [name, sub] : s["properties"].items()) {
        if (!v->contains(name) && sub.contains("default")) (*v)[name] = sub["default"];
      }
    }
    for (const auto& name : s.value("required", json::array())) {
      if (!v->contains(name.get<std::string>())) {
        errors_->push_back(
            {"FieldValueRequired", prefix + name.get<std::string>(), "Required value"});
      }
    }
    if (s.contains("minProperties") && v->size() < s["minProperties"].get<size_t>()) {
      Fail{this, path}.Invalid(*v, absl::StrCat("should have at least ",
                                                s["minProperties"].get<size_t>(), " properties"));
    }
    for (auto& [name, child] : v->items()) {
      const json* sub = PropertySchema(s, name, path);
      if (sub == nullptr) {
        if (!preserve) errors_->push_back({"", "", "unknown field \"" + prefix + name + "\""});
        continue;
      }
      const json* old_child =
          (old && old->is_object() && old->contains(name)) ? &(*old)[name] : nullptr;
      Node(&child, *sub, prefix + name, old_child);
    }
  }

  const json* PropertySchema(const json& s, const std::string& name, const std::string& path) {
    if (path.empty() && name == "metadata" && !metadata_schema_.is_null()) return &metadata_schema_;
    if (s.contains("properties") && s["properties"].contains(name)) return &s["properties"][name];
    if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
      return &s["additionalProperties"];
    }
    return nullptr;
  }

  void Array(json* v, const json& s, const std::string& path, const json* old) {
    const json v_shown = *v;
    if (s.contains("minItems") && v->size() < s["minItems"].get<size_t>()) {
      Fail{this, path}.Invalid(
          v_shown, absl::StrCat("should have at least ", s["minItems"].get<size_t>(), " items"));
    }
    if (s.contains("maxItems") && v->size() > s["maxItems"].get<size_t>()) {
      Fail{this, path}.Invalid(
          v_shown, absl::StrCat("should have at most ", s["maxItems"].get<size_t>(), " items"));
    }
    if (!s.contains("items")) return;
    for (size_t i = 0; i < v->size(); ++i) {
      Node(&(*v)[i], s["items"], absl::StrCat(path, "[", i, "]"), nullptr);
    }
    ListUniqueness(*v, s, path);
    (void)old;  // transition rules inside lists need list-map correlation; none are used
  }

  // x-kubernetes-list-type set: unique items; map: unique keys.
  void ListUniqueness(const json& v, const json& s, const std::string& path) {
    const std::string type = s.value("x-kubernetes-list-type", "atomic");
    if (type == "atomic") return;
    std::set<std::string> seen;
    for (size_t i = 0; i < v.size(); ++i) {
      json key = v[i];
      if (type == "map" && v[i].is_object()) {
        key = json::object();
        for (const auto& k : s.value("x-kubernetes-list-map-keys", json::array())) {
          key[k.get<std::string>()] = v[i].value(k.get<std::string>(), json());
        }
      }
      if (!seen.insert(key.dump()).second) {
        errors_->push_back({"FieldValueDuplicate", absl::StrCat(path, "[", i, "]"),
                            "Duplicate value: " + key.dump()});
      }
    }
  }

  void CelRules(const json& v, const json& s, const std::string& path, const json* old) {
    for (const auto& rule_spec : s.value("x-kubernetes-validations", json::array())) {
      const std::string rule = rule_spec.value("rule", "");
      if (IsTransitionRule(rule) && old == nullptr) continue;  // create: no oldSelf
      std::string where = path;
      const std::string field_path = rule_spec.value("fieldPath", "");
      if (!field_path.empty()) where += field_path[0] == '.' ? field_path : "." + field_path;
      const StatusOr<bool> ok = EvaluateCelRule(rule, v, old);
      // The API server shows the schema's type, not the value, as CEL's.
      const std::string type = json(s.value("type", "object")).dump();
      if (!ok.ok()) {
        errors_->push_back(
            {"FieldValueInvalid", where,
             "Invalid value: " + type + ": " + rule + ": " + std::string(ok.status().message())});
      } else if (!*ok) {
        errors_->push_back(
            {"FieldValueInvalid", where,
             "Invalid value: " + type + ": " + rule_spec.value("message", "failed rule: " + rule)});
      }
    }
  }

  const json& metadata_schema_;
  std::vector<FieldError>* errors_;
  std::vector<std::string>* pruned_;  // null: unknown fields are errors
};

}  // namespace

StatusOr<StructuralSchema> StructuralSchema::Create(nlohmann::json schema) {
  ES_RETURN_IF_ERROR(CheckSchemaNode(schema, "schema"));
  return StructuralSchema(std::move(schema));
}

void StructuralSchema::SetMetadataSchema(const StructuralSchema& schema) {
  metadata_schema_ = schema.schema_;
}

std::vector<std::string> StructuralSchema::Validate(nlohmann::json* object,
                                                    const nlohmann::json* old_object) const {
  std::vector<FieldError> errors;
  Validator(metadata_schema_, &errors, nullptr).Node(object, schema_, "", old_object);
  std::vector<std::string> out;
  for (const FieldError& e : errors) out.push_back(e.ToString());
  return out;
}

SchemaResult StructuralSchema::Prune(nlohmann::json* object, const nlohmann::json* old_object,
                                     const std::string& property) const {
  SchemaResult r;
  Validator v(metadata_schema_, &r.errors, &r.pruned);
  if (property.empty()) {
    v.Node(object, schema_, "", old_object);
    return r;
  }
  const json* sub = nullptr;
  if (schema_.contains("properties") && schema_["properties"].contains(property)) {
    sub = &schema_["properties"][property];
  }
  if (!object->is_object() || !object->contains(property)) return r;
  if ((*object)[property].is_null()) {  // a null is dropped, as at any other level
    object->erase(property);
    return r;
  }
  if (sub == nullptr) {
    r.pruned.push_back(property);
    object->erase(property);
    return r;
  }
  const json* old =
      (old_object != nullptr && old_object->is_object() && old_object->contains(property))
          ? &(*old_object)[property]
          : nullptr;
  v.Node(&(*object)[property], *sub, property, old);
  return r;
}

}  // namespace easyscale::schematest
