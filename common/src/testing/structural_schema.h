// File: common/src/testing/structural_schema.h
//
// kube-apiserver's handling of an object against a structural OpenAPI v3
// schema (a CRD's openAPIV3Schema, or the Kubernetes object shapes of
// tests/deploy/shapes), for tests: the deploy tests check what the chart and
// the examples hold, the test API server checks every custom resource written
// to it. In the server's order: drop nulls, prune (or report) unknown fields,
// apply defaults, check types, required, enum, ranges, lengths, patterns,
// formats, list maps, then the x-kubernetes-validations CEL rules (see
// cel_rules.h). Messages follow the API server's wording. Test-only.
//
//   StatusOr<StructuralSchema> s = StructuralSchema::Create(crd_schema_json);
//   std::vector<std::string> errors = s->Validate(&object);   // strict
//   // {"spec.ests: Invalid value: 0: spec.ests in body should be greater than or equal to 1"}
//   SchemaResult r = s->Prune(&object);   // r.pruned: {"spec.maxWorker"}; r.errors: FieldErrors
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::schematest {

// One error as kube's field.Error reports it: `reason` is the cause type of a
// 422 answer (FieldValueInvalid, FieldValueTypeInvalid, FieldValueRequired,
// FieldValueNotSupported, FieldValueDuplicate), `field` the path
// ("spec.ests", "spec.workers[0].rank"), `message` what follows "field: ".
struct FieldError {
  std::string reason;
  std::string field;
  std::string message;

  // "spec.ests: Invalid value: 0: spec.ests in body should be ..."
  std::string ToString() const { return field.empty() ? message : field + ": " + message; }
  bool operator==(const FieldError&) const = default;
};

// What a pruning validation found: the unknown fields it removed, by path,
// and the errors of what remains.
struct SchemaResult {
  std::vector<std::string> pruned;
  std::vector<FieldError> errors;
};

class StructuralSchema {
 public:
  // Fails when the schema uses a keyword this validator does not know, a node
  // lacks a type (structural schemas need one), or a CEL rule has no
  // implementation in cel_rules.cc: a test must never skip a check silently.
  static StatusOr<StructuralSchema> Create(nlohmann::json schema);

  // Validates `object` in place (nulls dropped, defaults applied) and returns
  // every error found, unknown fields among them (`unknown field "spec.x"`,
  // as kubectl's default fieldValidation=Strict reports them); empty means
  // accepted. `old_object`, when given, is the stored object of an update and
  // enables CEL transition rules (oldSelf).
  std::vector<std::string> Validate(nlohmann::json* object,
                                    const nlohmann::json* old_object = nullptr) const;

  // As the API server stores a custom resource: unknown fields are removed
  // (except under x-kubernetes-preserve-unknown-fields) and listed, then
  // defaults, then validation. With `property` set, only that root property
  // ("status", for the status subresource) is handled; `old_object` is still
  // the whole stored object.
  SchemaResult Prune(nlohmann::json* object, const nlohmann::json* old_object = nullptr,
                     const std::string& property = "") const;

  // Validates root-level `metadata` with `schema` instead of the root schema's
  // own entry: the API server checks ObjectMeta itself for every kind.
  void SetMetadataSchema(const StructuralSchema& schema);

  const nlohmann::json& schema() const { return schema_; }

 private:
  explicit StructuralSchema(nlohmann::json schema) : schema_(std::move(schema)) {}

  nlohmann::json schema_;
  nlohmann::json metadata_schema_;  // null when the root schema's own entry applies
};

}  // namespace easyscale::schematest
