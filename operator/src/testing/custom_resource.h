// File: operator/src/testing/custom_resource.h
//
// How kube-apiserver reads and checks a custom resource against its CRD (the
// one of crds/, which the test API server serves): unknown fields pruned as
// the request's fieldValidation says (Strict: 400; Warn: a warning each;
// Ignore: silently), defaults applied, then the schema's types, formats,
// bounds, enums, required fields, patterns and CEL rules (transition rules
// on updates). Invalid objects are 422 with every cause listed:
//   std::vector<std::string> warnings;
//   StatusOr<std::vector<FieldError>> e =
//       DecodeCustomResource(r, &obj, &old, /*statusOnly=*/false, FieldValidation::kWarn,
//       &warnings);
//   if (!e->empty()) return InvalidObject(r.resource, name, *e);
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "object_store.h"
#include "testing/structural_schema.h"

namespace easyscale::op::testing {

using schematest::FieldError;

// Whether the served CRD's schema loaded: the server refuses to start when
// it did not (a CEL rule without an implementation in cel_rules.cc, a schema
// keyword the validator does not know), rather than skip the checks.
Status CheckServedCrdSchema();

// The schema of the served CRD's version of `r`; nullptr when `r` is not a
// custom resource the server serves.
const schematest::StructuralSchema* CustomResourceSchema(const Resource& r);

// Prunes, defaults and validates `obj` in place (with `statusOnly`, only its
// status: a write to the status subresource). `old` is the stored object of
// an update (null on create). A pruned field under Strict is
// FailedPrecondition (400) with kube's strict decoding error; under Warn it
// adds a warning to `warnings` (when given). Returns the schema's errors.
StatusOr<std::vector<FieldError>> DecodeCustomResource(const ResourceInfo& r, nlohmann::json* obj,
                                                       const nlohmann::json* old, bool statusOnly,
                                                       FieldValidation fieldValidation,
                                                       std::vector<std::string>* warnings);

// kube's 422 for `errors` of the object `name`: `Kind.group "name" is invalid:
// <error>` (several in brackets), and details with one cause per error.
Status InvalidObject(const Resource& r, const std::string& name,
                     const std::vector<FieldError>& errors);

}  // namespace easyscale::op::testing
