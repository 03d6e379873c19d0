// Table answers from the served CRD's printer columns.
#include "table.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "easyscale/operator/kube_time.h"
#include "served_crd.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

// How long ago, as kube-apiserver prints ages (apimachinery's HumanDuration).
std::string HumanDuration(std::chrono::seconds d) {
  const int64_t s = d.count();
  if (s < -1) return "<invalid>";
  if (s < 0) return "0s";
  if (s < 120) return absl::StrCat(s, "s");
  const int64_t minutes = s / 60;
  if (minutes < 10)
    return s % 60 == 0 ? absl::StrCat(minutes, "m") : absl::StrCat(minutes, "m", s % 60, "s");
  if (minutes < 180) return absl::StrCat(minutes, "m");
  const int64_t hours = minutes / 60;
  if (hours < 8)
    return minutes % 60 == 0 ? absl::StrCat(hours, "h")
                             : absl::StrCat(hours, "h", minutes % 60, "m");
  if (hours < 48) return absl::StrCat(hours, "h");
  const int64_t days = hours / 24;
  if (hours < 24 * 8)
    return hours % 24 == 0 ? absl::StrCat(days, "d") : absl::StrCat(days, "d", hours % 24, "h");
  if (days < 365 * 2) return absl::StrCat(days, "d");
  if (days < 365 * 8)
    return days % 365 == 0 ? absl::StrCat(days / 365, "y")
                           : absl::StrCat(days / 365, "y", days % 365, "d");
  return absl::StrCat(days / 365, "y");
}

// The value at a simple JSONPath (".status.phase"); null when absent.
json Lookup(const json& obj, const std::string& path) {
  const json* cur = &obj;
  for (absl::string_view part : absl::StrSplit(path, '.', absl::SkipEmpty())) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(part));
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return *cur;
}

// A cell as kube-apiserver's CRD table convertor makes it: strings as
// printed, numbers and booleans when the value has the column's type, dates
// as ages; anything else is an empty cell.
json Cell(const json& value, const std::string& type) {
  if (value.is_null()) return nullptr;
  if (type == "string") return value.is_string() ? value : json(value.dump());
  if (type == "integer") return value.is_number_integer() ? value : json();
  if (type == "number") return value.is_number() ? value : json();
  if (type == "boolean") return value.is_boolean() ? value : json();
  if (type == "date" && value.is_string()) {
    StatusOr<WallClock::time_point> t = ParseTime(value.get<std::string>());
    if (!t.ok()) return nullptr;
    return HumanDuration(std::chrono::duration_cast<std::chrono::seconds>(WallClock::now() - *t));
  }
  return nullptr;
}

// What a row carries besides its cells (TableOptions.includeObject).
json RowObject(const json& obj, const std::string& includeObject) {
  if (includeObject == "Object") return obj;
  return {{"kind", "PartialObjectMetadata"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", obj.value("metadata", json::object())}};
}

}  // namespace

json TableFormat::Convert(const json& objects, const json& listMeta) const {
  json definitions = json::array({{{"name", "Name"},
                                   {"type", "string"},
                                   {"format", "name"},
                                   {"description", "Name must be unique within a namespace."},
                                   {"priority", 0}}});
  for (const json& c : columns) {
    definitions.push_back({{"name", c.value("name", "")},
                           {"type", c.value("type", "string")},
                           {"format", c.value("format", "")},
                           {"description", c.value("description", "")},
                           {"priority", c.value("priority", 0)}});
  }
  json rows = json::array();
  for (const json& obj : objects) {
    json cells = json::array({obj["metadata"].value("name", "")});
    for (const json& c : columns) {
      cells.push_back(Cell(Lookup(obj, c.value("jsonPath", "")), c.value("type", "string")));
    }
    json row = {{"cells", cells}};
    if (includeObject != "None") row["object"] = RowObject(obj, includeObject);
    rows.push_back(row);
  }
  return {{"kind", "Table"},
          {"apiVersion", apiVersion},
          {"metadata", listMeta},
          {"columnDefinitions", definitions},
          {"rows", rows}};
}

StatusOr<std::optional<TableFormat>> TableFormatFor(const ResourceInfo& r,
                                                    const std::string& accept,
                                                    const std::string& includeObject) {
  if (!includeObject.empty() && includeObject != "None" && includeObject != "Metadata" &&
      includeObject != "Object") {
    return absl::FailedPreconditionError(
        absl::StrCat("includeObject: Unsupported value: \"", includeObject,
                     "\": supported values: \"None\", \"Metadata\", \"Object\""));
  }
  const json& crd = ServedCrdVersion(r.resource);
  if (crd.is_null() || !crd.contains("additionalPrinterColumns")) return std::nullopt;
  // The first media range the server can give wins, as kube negotiates; a
  // range that is not a Table is answered with plain JSON.
  for (absl::string_view range : absl::StrSplit(accept, ',')) {
    std::vector<absl::string_view> params = absl::StrSplit(range, ';');
    for (absl::string_view& p : params) p = absl::StripAsciiWhitespace(p);
    auto has = [&](const std::string& p) {
      return std::find(params.begin() + 1, params.end(), p) != params.end();
    };
    if (!has("as=Table")) return std::nullopt;
    if (!has("g=meta.k8s.io")) continue;
    for (const char* v : {"v1", "v1beta1"}) {
      if (!has(absl::StrCat("v=", v))) continue;
      TableFormat t;
      t.apiVersion = absl::StrCat("meta.k8s.io/", v);
      t.includeObject = includeObject.empty() ? "Metadata" : includeObject;
      t.columns = crd["additionalPrinterColumns"];
      return std::optional<TableFormat>(std::move(t));
    }
  }
  return std::nullopt;
}

}  // namespace easyscale::op::testing
