// File: tests/deploy/structural_schema.h
//
// An offline stand-in for the API server's validation of an object against a
// structural OpenAPI v3 schema (a CRD's openAPIV3Schema, or the Kubernetes
// object shapes in shapes/*.yaml), in the server's order: drop nulls, reject
// unknown fields (kubectl's default strict field validation), apply defaults,
// check types, required, enum, ranges, lengths, patterns, formats, list maps,
// then the x-kubernetes-validations CEL rules (see cel_rules.h). Messages
// follow the API server's wording:
//
//   StatusOr<StructuralSchema> s = StructuralSchema::Create(crd_schema_json);
//   std::vector<std::string> errors = s->Validate(&object);
//   // {"spec.ests: Invalid value: 0: spec.ests in body should be greater than or equal to 1"}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::deploytest {

class StructuralSchema {
 public:
  // Fails when the schema uses a keyword this validator does not know, a node
  // lacks a type (structural schemas need one), or a CEL rule has no
  // implementation in cel_rules.cc: a test must never skip a check silently.
  static StatusOr<StructuralSchema> Create(nlohmann::json schema);

  // Validates `object` in place (nulls dropped, defaults applied) and returns
  // every error found; empty means accepted. `old_object`, when given, is the
  // stored object of an update and enables CEL transition rules (oldSelf).
  std::vector<std::string> Validate(nlohmann::json* object,
                                    const nlohmann::json* old_object = nullptr) const;

  // Validates root-level `metadata` with `schema` instead of the root schema's
  // own entry: the API server checks ObjectMeta itself for every kind.
  void SetMetadataSchema(const StructuralSchema& schema);

  const nlohmann::json& schema() const { return schema_; }

 private:
  explicit StructuralSchema(nlohmann::json schema) : schema_(std::move(schema)) {}

  nlohmann::json schema_;
  nlohmann::json metadata_schema_;  // null when the root schema's own entry applies
};

}  // namespace easyscale::deploytest
