#include "easyscale/common/node_inventory.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace easyscale {
namespace {

nlohmann::json OptionalString(const std::optional<std::string>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// Reads a field that is either null (or absent) or a "namespace/pod" string.
void ReadHolder(FieldReader& r, const nlohmann::json& obj, const char* name,
                std::optional<std::string>* out) {
  if (!obj.contains(name) || obj[name].is_null()) return;
  std::string v;
  r.String(name, &v);
  if (!r.ok()) return;
  const auto slash = v.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == v.size()) {
    return r.Fail(name, "must be \"namespace/pod\" or null, got \"" + v + "\"");
  }
  *out = v;
}

}  // namespace

nlohmann::json NodeGpusToJson(const std::vector<NodeGpu>& gpus) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& g : gpus) {
    nlohmann::json j = GpuFieldsToJson(g.device);
    j["heldBy"] = OptionalString(g.held_by);
    j["trainingPod"] = OptionalString(g.training_pod);
    list.push_back(std::move(j));
  }
  return list;
}

nlohmann::json NodeInventoryPatch(const std::vector<NodeGpu>& gpus) {
  std::set<std::string> types;
  size_t healthy = 0;
  for (const auto& g : gpus) {
    types.insert(g.device.type);
    if (g.device.healthy) ++healthy;
  }
  const std::string type = types.empty() ? "none" : types.size() == 1 ? *types.begin() : "mixed";
  return {{"metadata",
           {{"labels", {{kGpuTypeLabel, type}, {kGpuCountLabel, std::to_string(healthy)}}},
            {"annotations", {{kGpusAnnotation, NodeGpusToJson(gpus).dump()}}}}}};
}

StatusOr<std::vector<NodeGpu>> ParseNodeGpus(const std::string& annotation_value) {
  const nlohmann::json doc =
      nlohmann::json::parse(annotation_value, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    return absl::InvalidArgumentError(std::string(kGpusAnnotation) + ": not valid JSON");
  if (!doc.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kGpusAnnotation, ": must be a list, got ", doc.type_name()));
  }
  std::vector<NodeGpu> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    FieldReader r(doc[i], absl::StrCat("[", i, "]"));
    NodeGpu g;
    ReadGpuFields(r, /*known_type_only=*/false, &g.device);
    if (r.ok()) ReadHolder(r, doc[i], "heldBy", &g.held_by);
    if (r.ok()) ReadHolder(r, doc[i], "trainingPod", &g.training_pod);
    if (!r.ok()) return r.status();
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace easyscale
