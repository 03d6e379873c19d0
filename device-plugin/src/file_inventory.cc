#include "easyscale/device_plugin/file_inventory.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "gpu_type.h"

namespace easyscale::dp {

StatusOr<std::vector<GpuDevice>> ParseInventory(const std::string& text,
                                                const std::string& source) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  }
  auto fail = [&](const Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  };
  if (!doc.is_object()) return fail(absl::InvalidArgumentError("must be an object"));
  if (!doc.contains("devices") || doc["devices"].is_null()) {
    return fail(absl::InvalidArgumentError("devices: is required"));
  }
  if (!doc["devices"].is_array()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("devices: must be a list, got ", doc["devices"].type_name())));
  }
  std::vector<GpuDevice> devices;
  std::set<std::string> ids;
  std::set<int> indices;
  const auto& list = doc["devices"];
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = absl::StrCat("devices[", i, "]");
    FieldReader r(list[i], path);
    GpuDevice d;
    ReadGpuFields(r, /*known_type_only=*/true, &d);
    r.Int("index", &d.index, /*required=*/true, 0);
    r.String("name", &d.name);
    r.StringList("devicePaths", &d.device_paths);
    if (!r.ok()) return fail(r.status());
    for (size_t p = 0; p < d.device_paths.size(); ++p) {
      if (d.device_paths[p].empty() || d.device_paths[p][0] != '/') {
        r.Fail(absl::StrCat("devicePaths[", p, "]"), "must be an absolute path");
      }
    }
    if (!ids.insert(d.id).second) r.Fail("id", "duplicate device ID \"" + d.id + "\"");
    if (!indices.insert(d.index).second) r.Fail("index", absl::StrCat("duplicate index ", d.index));
    if (!r.ok()) return fail(r.status());
    if (d.name.empty()) d.name = d.type;
    devices.push_back(std::move(d));
  }
  return devices;
}

StatusOr<std::vector<GpuDevice>> LoadInventoryFile(const std::string& path) {
  ES_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxInventoryFileBytes));
  return ParseInventory(text, path);
}

nlohmann::json InventoryToJson(const std::vector<GpuDevice>& devices) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& d : devices) {
    nlohmann::json j = GpuFieldsToJson(d);
    j["index"] = d.index;
    j["name"] = d.name;
    j["devicePaths"] = d.device_paths;
    list.push_back(std::move(j));
  }
  return {{"devices", list}};
}

}  // namespace easyscale::dp
