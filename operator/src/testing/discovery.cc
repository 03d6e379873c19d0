// Legacy discovery and /version, from the served resources.
#include "discovery.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "api_answers.h"
#include "object_store.h"

namespace easyscale::op::testing {
namespace {

using nlohmann::json;

void Send(httplib::Response& res, const json& j) {
  res.set_content(WireJson(j), "application/json");
}

json ResourceList(const std::string& groupVersion) {
  json list = json::array();
  for (const ResourceInfo& r : ServedResources()) {
    if (r.resource.apiVersion() != groupVersion) continue;
    list.push_back({{"name", r.resource.plural},
                    {"singularName", absl::AsciiStrToLower(r.resource.kind)},
                    {"namespaced", r.resource.namespaced},
                    {"kind", r.resource.kind},
                    {"verbs", {"create", "delete", "get", "list", "patch", "update", "watch"}},
                    {"shortNames", r.shortNames},
                    {"categories", r.categories}});
    if (r.hasStatus) {
      list.push_back({{"name", r.resource.plural + "/status"},
                      {"singularName", ""},
                      {"namespaced", r.resource.namespaced},
                      {"kind", r.resource.kind},
                      {"verbs", {"get", "patch", "update"}}});
    }
    if (r.resource.plural == "pods" && r.resource.group.empty()) {  // what kubectl drain looks for
      list.push_back({{"name", "pods/eviction"},
                      {"singularName", ""},
                      {"namespaced", true},
                      {"group", "policy"},
                      {"version", "v1"},
                      {"kind", "Eviction"},
                      {"verbs", {"create"}}});
    }
  }
  return list;
}

}  // namespace

void InstallDiscovery(httplib::Server& svr) {
  svr.Get("/version", [](const httplib::Request&, httplib::Response& res) {
    Send(res, {{"major", kServedMajor},
               {"minor", kServedMinor},
               {"gitVersion", absl::StrCat("v", kServedMajor, ".", kServedMinor, ".0")},
               {"gitCommit", "easyscale-test-apiserver"},
               {"gitTreeState", "clean"},
               {"buildDate", "2026-01-01T00:00:00Z"},
               {"goVersion", "go1.25"},
               {"compiler", "gc"},
               {"platform", "linux/amd64"}});
  });
  svr.Get("/api", [](const httplib::Request&, httplib::Response& res) {
    Send(res, {{"kind", "APIVersions"},
               {"versions", {"v1"}},
               {"serverAddressByClientCIDRs",
                {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1"}}}}});
  });
  svr.Get("/apis", [](const httplib::Request&, httplib::Response& res) {
    json groups = json::array();
    std::set<std::string> seen;
    for (const ResourceInfo& r : ServedResources()) {
      const std::string gv = r.resource.apiVersion();
      if (r.resource.group.empty() || !seen.insert(gv).second) continue;
      const json version = {{"groupVersion", gv}, {"version", r.resource.version}};
      groups.push_back(
          {{"name", r.resource.group}, {"versions", {version}}, {"preferredVersion", version}});
    }
    Send(res, {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}});
  });
  auto resources = [](const std::string& gv, httplib::Response& res) {
    const json list = ResourceList(gv);
    if (list.empty()) {
      return SendStatus(res, 404, "NotFound", "the server could not find the requested resource");
    }
    Send(res, {{"kind", "APIResourceList"},
               {"apiVersion", "v1"},
               {"groupVersion", gv},
               {"resources", list}});
  };
  svr.Get("/api/v1",
          [resources](const httplib::Request&, httplib::Response& res) { resources("v1", res); });
  svr.Get(R"(/apis/([^/]+)/([^/]+))",
          [resources](const httplib::Request& req, httplib::Response& res) {
            resources(std::string(req.matches[1]) + "/" + std::string(req.matches[2]), res);
          });
}

}  // namespace easyscale::op::testing
