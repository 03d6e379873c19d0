// File: tests/deploy/object_shapes.h
//
// Validates any object the chart renders or a user applies, by its apiVersion
// and kind: built-in kinds against the schemas in shapes/*.yaml, custom resources against
// the openAPIV3Schema of a CRD added with AddCustomResourceDefinition. On top
// of the schema it checks what the API server checks outside it: label keys,
// and metadata.namespace only on namespaced kinds.
//
//   StatusOr<ObjectShapes> shapes = ObjectShapes::Load(SourcePath("tests/deploy/shapes"));
//   ES_RETURN_IF_ERROR(shapes->AddCustomResourceDefinition(crd));
//   std::vector<std::string> errors = shapes->Validate(&object);
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "testing/structural_schema.h"

namespace easyscale::deploytest {

using schematest::StructuralSchema;

class ObjectShapes {
 public:
  // Reads every *.yaml in `shapes_dir`: their `definitions` (shared schema
  // pieces, used as {$ref: NAME}) and `kinds` ("apiVersion/kind" -> scope, schema).
  static StatusOr<ObjectShapes> Load(const std::string& shapes_dir);

  // Registers the custom resource a CRD object defines (every served version);
  // the CRD itself must pass Validate first.
  Status AddCustomResourceDefinition(const nlohmann::json& crd);

  // Errors of `object` (defaults applied in place); "no shape for KIND" when
  // its apiVersion/kind is unknown.
  std::vector<std::string> Validate(nlohmann::json* object,
                                    const nlohmann::json* old_object = nullptr) const;

  // The schema of "apiVersion/kind", or nullptr.
  const StructuralSchema* Find(const std::string& api_version, const std::string& kind) const;

 private:
  struct Kind {
    StructuralSchema schema;
    bool namespaced;
  };
  explicit ObjectShapes(StructuralSchema object_meta) : object_meta_(std::move(object_meta)) {}

  StructuralSchema object_meta_;
  std::map<std::string, Kind> kinds_;
};

// Label-key syntax errors ("[prefix/]name") in every labels, matchLabels and
// nodeSelector map under `object`.
std::vector<std::string> LabelKeyErrors(const nlohmann::json& object, const std::string& path = "");

}  // namespace easyscale::deploytest
