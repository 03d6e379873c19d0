// The OpenAPI v3 documents of the served resources, built once.
#include "openapi.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api_answers.h"
#include "object_store.h"
#include "served_crd.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

// "easyscale.io" -> "io.easyscale"; the core group is "io.k8s.api.core".
std::string SchemaName(const Resource& r) {
  std::string prefix = "io.k8s.api.core";
  if (!r.group.empty()) {
    std::vector<std::string> parts = absl::StrSplit(r.group, '.');
    std::reverse(parts.begin(), parts.end());
    prefix = absl::StrJoin(parts, ".");
  }
  return absl::StrCat(prefix, ".", r.version, ".", r.kind);
}

json QueryParameter(const std::string& name, const std::string& description) {
  return {{"name", name},
          {"in", "query"},
          {"description", description},
          {"schema", {{"type", "string"}, {"uniqueItems", true}}}};
}

// The paths and the schema of one resource, added to a group version's document.
void AddResource(const ResourceInfo& info, json& doc) {
  const Resource& r = info.resource;
  const std::string name = SchemaName(r);
  const json gvk = {{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
  const json& crd = ServedCrdVersion(r);
  json schema = crd.is_null() ? json() : crd["schema"]["openAPIV3Schema"];
  if (schema.is_null()) {
    schema = {{"type", "object"},
              {"description", r.kind + " (the test API server checks only the fields it reads)"},
              {"x-kubernetes-preserve-unknown-fields", true}};
  }
  schema["x-kubernetes-group-version-kind"] = json::array({gvk});
  doc["components"]["schemas"][name] = schema;

  const json answer = {
      {"200",
       {{"description", "OK"},
        {"content",
         {{"application/json", {{"schema", {{"$ref", "#/components/schemas/" + name}}}}}}}}}};
  const json writes = {
      QueryParameter("dryRun", "When present, All: run every stage but storage."),
      QueryParameter("fieldManager", "The name of the actor making the change."),
      QueryParameter("fieldValidation", "Ignore, Warn or Strict: what unknown fields cause.")};
  auto op = [&](const std::string& action, const json& parameters) {
    return json{{"x-kubernetes-action", action},
                {"x-kubernetes-group-version-kind", gvk},
                {"parameters", parameters},
                {"responses", answer}};
  };
  const std::string base =
      absl::StrCat(r.group.empty() ? "/api/" : "/apis/" + r.group + "/", r.version,
                   r.namespaced ? "/namespaces/{namespace}/" : "/", r.plural);
  doc["paths"][base] = {{"get", op("list", json::array())}, {"post", op("post", writes)}};
  doc["paths"][base + "/{name}"] = {{"get", op("get", json::array())},
                                    {"put", op("put", writes)},
                                    {"patch", op("patch", writes)},
                                    {"delete", op("delete", json::array({writes[0]}))}};
}

// "api/v1" or "apis/G/V" -> that group version's document.
std::map<std::string, std::string> BuildDocuments() {
  std::map<std::string, json> docs;
  for (const ResourceInfo& info : ServedResources()) {
    const std::string key = info.resource.group.empty() ? "api/" + info.resource.version
                                                        : "apis/" + info.resource.apiVersion();
    json& doc = docs[key];
    if (doc.is_null()) {
      doc = {{"openapi", "3.0.0"},
             {"info", {{"title", "Kubernetes"}, {"version", "v1.35.0"}}},
             {"paths", json::object()},
             {"components", {{"schemas", json::object()}}}};
    }
    AddResource(info, doc);
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, doc] : docs) out[key] = WireJson(doc);
  return out;
}

}  // namespace

void InstallOpenApi(httplib::Server& svr) {
  auto docs = std::make_shared<const std::map<std::string, std::string>>(BuildDocuments());
  svr.Get("/openapi/v3", [docs](const httplib::Request&, httplib::Response& res) {
    json paths = json::object();
    for (const auto& [key, text] : *docs) {
      paths[key] = {{"serverRelativeURL",
                     absl::StrCat("/openapi/v3/", key, "?hash=", std::hash<std::string>()(text))}};
    }
    res.set_content(WireJson({{"paths", paths}}), "application/json");
  });
  svr.Get(R"(/openapi/v3/(api/[^/]+|apis/[^/]+/[^/]+))", [docs](const httplib::Request& req,
                                                                httplib::Response& res) {
    auto it = docs->find(req.matches[1]);
    if (it == docs->end()) {
      return SendStatus(res, 404, "NotFound", "the server could not find the requested resource");
    }
    res.set_content(it->second, "application/json");
  });
}

}  // namespace easyscale::op::testing
