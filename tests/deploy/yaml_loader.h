// File: tests/deploy/yaml_loader.h
//
// Reads Kubernetes YAML (one or many `---` documents) into JSON the way
// kubectl and the API server see it: sigs.k8s.io/yaml resolves plain scalars
// with YAML 1.1 rules (yes/no/on/off are booleans), quoted scalars stay strings.
//
//   StatusOr<std::vector<nlohmann::json>> docs = LoadYamlDocuments(text, "x.yaml");
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::deploytest {

// Every non-empty document of `text`, in order; `source` names it in errors.
StatusOr<std::vector<nlohmann::json>> LoadYamlDocuments(const std::string& text,
                                                        const std::string& source);
// LoadYamlDocuments of a file's content.
StatusOr<std::vector<nlohmann::json>> LoadYamlFile(const std::string& path);

}  // namespace easyscale::deploytest
