#include "yaml_loader.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <regex>

#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"

namespace easyscale::deploytest {
namespace {

// YAML 1.1 plain-scalar resolution, as go-yaml v2 (under sigs.k8s.io/yaml) does it.
nlohmann::json ResolvePlain(const std::string& s) {
  static const std::regex kNull("^(~|null|Null|NULL|)$");
  static const std::regex kTrue("^(y|Y|yes|Yes|YES|true|True|TRUE|on|On|ON)$");
  static const std::regex kFalse("^(n|N|no|No|NO|false|False|FALSE|off|Off|OFF)$");
  static const std::regex kInt("^[-+]?(0|[1-9][0-9_]*)$");
  static const std::regex kHex("^[-+]?0x[0-9a-fA-F_]+$");
  static const std::regex kFloat(
      "^[-+]?([0-9][0-9_]*)?\\.[0-9_]*([eE][-+]?[0-9]+)?$|^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$");
  if (std::regex_match(s, kNull)) return nullptr;
  if (std::regex_match(s, kTrue)) return true;
  if (std::regex_match(s, kFalse)) return false;
  std::string digits;
  for (char c : s) {
    if (c != '_') digits += c;
  }
  if (std::regex_match(s, kInt) || std::regex_match(s, kHex)) {
    errno = 0;
    const long long v = std::strtoll(digits.c_str(), nullptr, 0);
    if (errno == 0) return v;
    return std::strtod(digits.c_str(), nullptr);
  }
  if (std::regex_match(s, kFloat) && s != "." && s != "+." && s != "-.") {
    return std::strtod(digits.c_str(), nullptr);
  }
  // Everything else, .inf and .nan included (JSON has neither), is a string.
  return s;
}

StatusOr<nlohmann::json> ToJson(const YAML::Node& node, const std::string& where) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nlohmann::json(nullptr);
    case YAML::NodeType::Scalar:
      // Tag "!" marks a quoted scalar; "?" (or empty) a plain one to resolve.
      if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") {
        return nlohmann::json(node.Scalar());
      }
      return ResolvePlain(node.Scalar());
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        ES_ASSIGN_OR_RETURN(nlohmann::json item, ToJson(node[i], where));
        out.push_back(std::move(item));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return absl::InvalidArgumentError(where + ": map keys must be scalars");
        }
        const std::string key = kv.first.Scalar();
        if (out.contains(key)) {
          // The API server's strict decoding rejects duplicate keys too.
          return absl::InvalidArgumentError(where + ": duplicate key \"" + key + "\"");
        }
        ES_ASSIGN_OR_RETURN(out[key], ToJson(kv.second, where));
      }
      return out;
    }
  }
  return absl::InternalError(where + ": unknown YAML node type");
}

}  // namespace

StatusOr<std::vector<nlohmann::json>> LoadYamlDocuments(const std::string& text,
                                                        const std::string& source) {
  std::vector<YAML::Node> nodes;
  try {
    nodes = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(source + ": " + e.what());
  }
  std::vector<nlohmann::json> docs;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string where = absl::StrCat(source, " document ", i + 1);
    ES_ASSIGN_OR_RETURN(nlohmann::json doc, ToJson(nodes[i], where));
    if (doc.is_null()) continue;  // an empty document between two `---`
    if (!doc.is_object()) return absl::InvalidArgumentError(where + ": must be a mapping");
    docs.push_back(std::move(doc));
  }
  return docs;
}

StatusOr<std::vector<nlohmann::json>> LoadYamlFile(const std::string& path) {
  ES_ASSIGN_OR_RETURN(std::string text, ReadFile(path, size_t{16} << 20));
  return LoadYamlDocuments(text, path);
}

}  // namespace easyscale::deploytest
