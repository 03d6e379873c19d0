// charts/easyscale: helm lint, and helm template with default and non-default
// values, every rendered object checked against its Kubernetes shape, the
// objects' references to each other, least-privilege RBAC and the settings
// the issue asks for (two leader-elected operators, the device plugin on GPU
// nodes with the kubelet sockets, an optional ServiceMonitor, the dashboard).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "easyscale/common/file_io.h"
#include "test_support.h"
#include "yaml_loader.h"

namespace easyscale::deploytest {
namespace {

using nlohmann::json;

// The values a non-default install sets.
// clang-format off
const std::vector<std::string> kCustomValues = {
    "--set", "serviceMonitor.enabled=true",
    "--set", "serviceMonitor.labels.release=prometheus",
    "--set", "operator.replicas=3",
    "--set", "operator.watchNamespace=ml-jobs",
    "--set", "image.registry=registry.example.com/ml",
    "--set", "image.tag=1.2.3",
    "--set", "devicePlugin.image.tag=1.2.4",
    "--set-json", "devicePlugin.inventory=\"{\\\"devices\\\": []}\"",
    "--set", "devicePlugin.runtimeClassName=nvidia",
    "--set", "dashboard.enabled=false",
    "--set", "fullnameOverride=es",
    "--set-json", "operator.extraEnv=[{\"name\":\"LOG_FORMAT\",\"value\":\"json\"}]",
    "--set-json", "operator.extraArgs=[\"--kubeconfig=/etc/kube/config\"]",
    "--set", "operator.podAnnotations.team=ml",
    "--set", "operator.nodeSelector.kubernetes\\.io/os=linux",
    "--set-json", "operator.tolerations=[{\"key\":\"infra\",\"operator\":\"Exists\"}]",
    "--set", "operator.priorityClassName=system-cluster-critical",
    "--set", "operator.serviceAccount.annotations.owner=ml",
    "--set", "devicePlugin.podAnnotations.team=ml",
    "--set-json", "imagePullSecrets=[{\"name\":\"registry-creds\"}]"};
// clang-format on

std::vector<const json*> OfKind(const std::vector<json>& docs, const std::string& kind) {
  std::vector<const json*> out;
  for (const auto& d : docs) {
    if (d["kind"] == kind) out.push_back(&d);
  }
  return out;
}

const json& Only(const std::vector<json>& docs, const std::string& kind) {
  const auto all = OfKind(docs, kind);
  EXPECT_EQ(all.size(), 1u) << kind;
  static const json kNone;
  return all.empty() ? kNone : *all[0];
}

bool Contains(const json& labels, const json& selector) {
  for (const auto& [k, v] : selector.items()) {
    if (!labels.contains(k) || labels[k] != v) return false;
  }
  return true;
}

std::string Arg(const json& container, const std::string& prefix) {
  for (const auto& a : container["args"]) {
    if (a.get<std::string>().rfind(prefix, 0) == 0) return a;
  }
  return "";
}

// Every rendered object passes its shape, and every reference between them
// resolves: selectors, Service target ports, role bindings, service accounts,
// ConfigMap volumes, the ServiceMonitor's Service and port.
void ExpectValidAndWired(std::vector<json> docs) {
  auto shapes = LoadShapesWithCrd();
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  std::set<std::string> names;  // kind/namespace/name
  for (auto& d : docs) {
    const std::string id = d["kind"].get<std::string>() + "/" +
                           d["metadata"].value("namespace", "") + "/" +
                           d["metadata"]["name"].get<std::string>();
    EXPECT_EQ(shapes->Validate(&d), std::vector<std::string>{}) << id;
    EXPECT_TRUE(names.insert(id).second) << "rendered twice: " << id;
  }
  auto has = [&](const std::string& kind, const std::string& ns, const json& name) {
    return names.count(kind + "/" + ns + "/" + name.get<std::string>()) > 0;
  };
  std::vector<std::pair<json, json>> pods;  // (namespace, pod template)
  for (const auto& kind : {"Deployment", "DaemonSet"}) {
    for (const json* w : OfKind(docs, kind)) {
      const json& t = (*w)["spec"]["template"];
      EXPECT_TRUE(Contains(t["metadata"]["labels"], (*w)["spec"]["selector"]["matchLabels"]))
          << (*w)["metadata"]["name"] << ": selector does not match template labels";
      const std::string ns = (*w)["metadata"]["namespace"];
      EXPECT_TRUE(has("ServiceAccount", ns, t["spec"]["serviceAccountName"]))
          << t["spec"]["serviceAccountName"];
      for (const auto& v : t["spec"].value("volumes", json::array())) {
        if (v.contains("configMap")) {
          EXPECT_TRUE(has("ConfigMap", ns, v["configMap"]["name"]));
        }
      }
      pods.emplace_back(ns, t);
    }
  }
  for (const json* s : OfKind(docs, "Service")) {
    bool selected = false;
    for (const auto& [ns, t] : pods) {
      if (ns != (*s)["metadata"]["namespace"] ||
          !Contains(t["metadata"]["labels"], (*s)["spec"]["selector"]))
        continue;
      selected = true;
      for (const auto& p : (*s)["spec"]["ports"]) {
        bool found = false;
        for (const auto& c : t["spec"]["containers"]) {
          for (const auto& cp : c.value("ports", json::array())) {
            found |=
                cp.value("name", "") == p["targetPort"] || cp["containerPort"] == p["targetPort"];
          }
        }
        EXPECT_TRUE(found) << (*s)["metadata"]["name"] << " targetPort " << p["targetPort"];
      }
    }
    EXPECT_TRUE(selected) << (*s)["metadata"]["name"] << " selects no pods";
  }
  for (const auto& kind : {"RoleBinding", "ClusterRoleBinding"}) {
    for (const json* b : OfKind(docs, kind)) {
      const std::string role_ns =
          (*b)["roleRef"]["kind"] == "Role" ? (*b)["metadata"]["namespace"] : "";
      EXPECT_TRUE(has((*b)["roleRef"]["kind"], role_ns, (*b)["roleRef"]["name"]))
          << kind << " " << (*b)["metadata"]["name"] << " binds a role that is not rendered";
      for (const auto& s : (*b)["subjects"]) {
        EXPECT_TRUE(has("ServiceAccount", s["namespace"], s["name"])) << s.dump();
      }
    }
  }
  for (const json* m : OfKind(docs, "ServiceMonitor")) {
    bool found = false;
    for (const json* s : OfKind(docs, "Service")) {
      if (!Contains((*s)["metadata"]["labels"], (*m)["spec"]["selector"]["matchLabels"])) continue;
      for (const auto& p : (*s)["spec"]["ports"])
        found |= p["name"] == (*m)["spec"]["endpoints"][0]["port"];
    }
    EXPECT_TRUE(found) << "the ServiceMonitor matches no Service port";
  }
}

// resource -> verbs, over all rules of a role.
// "group/resource" -> verbs; a rule narrowed to some names adds "[name,...]".
std::map<std::string, std::set<std::string>> Grants(const json& role) {
  std::map<std::string, std::set<std::string>> grants;
  for (const auto& r : role["rules"]) {
    std::string names;
    for (const auto& n : r.value("resourceNames", json::array())) {
      names += (names.empty() ? "[" : ",") + n.get<std::string>();
    }
    if (!names.empty()) names += "]";
    for (const auto& g : r["apiGroups"]) {
      for (const auto& res : r["resources"]) {
        for (const auto& v : r["verbs"]) {
          grants[g.get<std::string>() + "/" + res.get<std::string>() + names].insert(v);
        }
      }
    }
  }
  return grants;
}

const std::map<std::string, std::set<std::string>> kOperatorJobGrants = {
    {"easyscale.io/easyscalejobs", {"get", "list", "watch", "update", "patch"}},
    {"easyscale.io/easyscalejobs/status", {"get", "update", "patch"}},
    {"easyscale.io/easyscalejobs/finalizers", {"update"}},
    {"/pods", {"get", "list", "watch", "create", "delete"}},
    {"/events", {"create", "patch"}},
    {"/secrets", {"create"}},
    {"networking.k8s.io/networkpolicies", {"create"}},
    {"/configmaps", {"get", "create", "update"}}};  // the jobs' certificate histories

TEST(Helm, LintsWithDefaultAndCustomValues) {
  for (const auto& extra : {std::vector<std::string>{}, kCustomValues}) {
    std::vector<std::string> args = {"lint", "--strict", SourcePath("charts/easyscale")};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = RunHelm(args);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exitCode, 0) << r->out << r->err;
    EXPECT_NE(r->out.find("0 chart(s) failed"), std::string::npos) << r->out;
  }
}

TEST(Chart, DefaultRenderIsValidAndWired) {
  auto docs = RenderChart();
  ASSERT_TRUE(docs.ok()) << docs.status();
  std::multiset<std::string> kinds;
  for (const auto& d : *docs) kinds.insert(d["kind"]);
  EXPECT_EQ(kinds, (std::multiset<std::string>{
                       "CustomResourceDefinition", "Deployment", "DaemonSet", "ServiceAccount",
                       "ServiceAccount", "ClusterRole", "ClusterRole", "ClusterRoleBinding",
                       "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Service",
                       "ConfigMap", "NetworkPolicy"}));
  ExpectValidAndWired(*docs);
}

TEST(Chart, OperatorRunsTwoLeaderElectedHardenedReplicas) {
  auto docs = RenderChart();
  ASSERT_TRUE(docs.ok()) << docs.status();
  const json& d = Only(*docs, "Deployment");
  EXPECT_EQ(d["spec"]["replicas"], 2);
  const json& pod = d["spec"]["template"]["spec"];
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["image"], "docker.io/easyscale/easyscale-operator:0.1.0");
  EXPECT_EQ(Arg(c, "--leader-elect"), "--leader-elect");
  EXPECT_EQ(Arg(c, "--metrics-addr"), "--metrics-addr=:8080");
  EXPECT_EQ(Arg(c, "--health-addr"), "--health-addr=:8081");
  EXPECT_EQ(Arg(c, "--control-addr"), "--control-addr=:8090");
  EXPECT_EQ(Arg(c, "--control-key-secret"), "--control-key-secret=easyscale-control-key");
  EXPECT_EQ(Arg(c, "--network-policy"), "") << "per-job policies by default";
  EXPECT_EQ(Arg(c, "--namespace"), "") << "all namespaces by default";
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["port"], "health");
  EXPECT_TRUE(c["resources"].contains("requests") && c["resources"].contains("limits"));
  EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
  const json control_url = c["env"][2];
  EXPECT_EQ(control_url["name"], "EASYSCALE_CONTROL_URL");
  EXPECT_EQ(control_url["value"], "http://easyscale-operator-control.easyscale-system.svc:8090");
}

TEST(Chart, DevicePluginRunsOnGpuNodesWithKubeletSockets) {
  auto docs = RenderChart();
  ASSERT_TRUE(docs.ok()) << docs.status();
  const json& pod = Only(*docs, "DaemonSet")["spec"]["template"]["spec"];
  EXPECT_EQ(pod["priorityClassName"], "system-node-critical");
  EXPECT_TRUE(
      pod["affinity"]["nodeAffinity"].contains("requiredDuringSchedulingIgnoredDuringExecution"));
  EXPECT_FALSE(pod["tolerations"].empty());
  const json& c = pod["containers"][0];
  EXPECT_EQ(Arg(c, "--kubelet-socket"),
            "--kubelet-socket=/var/lib/kubelet/device-plugins/kubelet.sock");
  EXPECT_EQ(Arg(c, "--pod-resources-socket"),
            "--pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock");
  EXPECT_EQ(Arg(c, "--inventory-file"), "");
  EXPECT_EQ(c["env"][0], json({{"name", "NODE_NAME"},
                               {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}}));
  std::map<std::string, std::string> host_paths, mounts;
  for (const auto& v : pod["volumes"]) host_paths[v["name"]] = v["hostPath"]["path"];
  for (const auto& m : c["volumeMounts"]) mounts[m["name"]] = m["mountPath"];
  const std::map<std::string, std::string> want = {
      {"device-plugins", "/var/lib/kubelet/device-plugins"},
      {"pod-resources", "/var/lib/kubelet/pod-resources"}};
  EXPECT_EQ(host_paths, want);
  EXPECT_EQ(mounts, want);
  EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
}

TEST(Chart, RbacIsLeastPrivilege) {
  auto docs = RenderChart();
  ASSERT_TRUE(docs.ok()) << docs.status();
  std::map<std::string, std::map<std::string, std::set<std::string>>> by_name;
  for (const auto& kind : {"ClusterRole", "Role"}) {
    for (const json* r : OfKind(*docs, kind)) by_name[(*r)["metadata"]["name"]] = Grants(*r);
  }
  auto operator_grants = kOperatorJobGrants;
  operator_grants["/nodes"] = {"get", "list", "watch"};
  EXPECT_EQ(by_name["easyscale-operator"], operator_grants);
  EXPECT_EQ(by_name["easyscale-operator-leader-election"],
            (std::map<std::string, std::set<std::string>>{
                {"coordination.k8s.io/leases", {"get", "create", "update"}},
                {"/secrets[easyscale-control-key]", {"get"}},
                {"/secrets", {"create"}}}));
  EXPECT_EQ(by_name["easyscale-device-plugin"],
            (std::map<std::string, std::set<std::string>>{{"/nodes", {"get", "patch"}}}));
  EXPECT_EQ(by_name.size(), 3u);
}

TEST(Chart, CustomValuesRenderValidAndWired) {
  auto docs = RenderChart(kCustomValues);
  ASSERT_TRUE(docs.ok()) << docs.status();
  ExpectValidAndWired(*docs);
  const json& d = Only(*docs, "Deployment");
  EXPECT_EQ(d["metadata"]["name"], "es-operator");
  EXPECT_EQ(d["spec"]["replicas"], 3);
  const json& c = d["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["image"], "registry.example.com/ml/easyscale-operator:1.2.3");
  EXPECT_EQ(Arg(c, "--namespace"), "--namespace=ml-jobs");
  EXPECT_EQ(Arg(c, "--kubeconfig"), "--kubeconfig=/etc/kube/config");
  EXPECT_EQ(c["env"].back(), json({{"name", "LOG_FORMAT"}, {"value", "json"}}));
  EXPECT_EQ(d["spec"]["template"]["spec"]["nodeSelector"], json({{"kubernetes.io/os", "linux"}}));
  EXPECT_EQ(d["spec"]["template"]["spec"]["imagePullSecrets"][0]["name"], "registry-creds");
  EXPECT_EQ(d["spec"]["template"]["metadata"]["annotations"]["team"], "ml");
  const json& plugin = Only(*docs, "DaemonSet")["spec"]["template"]["spec"];
  EXPECT_EQ(plugin["containers"][0]["image"],
            "registry.example.com/ml/easyscale-device-plugin:1.2.4");
  EXPECT_EQ(Arg(plugin["containers"][0], "--inventory-file"),
            "--inventory-file=/etc/easyscale/inventory");
  EXPECT_EQ(plugin["runtimeClassName"], "nvidia");
  const json& monitor = Only(*docs, "ServiceMonitor");
  EXPECT_EQ(monitor["metadata"]["labels"]["release"], "prometheus");
  EXPECT_TRUE(OfKind(*docs, "ConfigMap").size() == 1) << "only the inventory, no dashboard";
  // Watching one namespace: job, pod and event rights only there.
  for (const json* r : OfKind(*docs, "Role")) {
    if ((*r)["metadata"]["name"] != "es-operator") continue;
    EXPECT_EQ((*r)["metadata"]["namespace"], "ml-jobs");
    EXPECT_EQ(Grants(*r), kOperatorJobGrants);
  }
  for (const json* r : OfKind(*docs, "ClusterRole")) {
    if ((*r)["metadata"]["name"] != "es-operator") continue;
    EXPECT_EQ(Grants(*r), (std::map<std::string, std::set<std::string>>{
                              {"/nodes", {"get", "list", "watch"}},
                              {"/pods", {"get", "list", "watch"}}}));  // inference pods anywhere
  }
}

// The non-test sources of part/, or empty while no CMakeLists.txt there builds
// the binary easyscale-<part> yet.
std::vector<std::string> BinarySources(const std::string& part) {
  std::vector<std::string> texts;
  bool has_binary = false;
  for (const auto& e : std::filesystem::recursive_directory_iterator(SourcePath(part))) {
    const std::string path = e.path().string();
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    auto text = ReadFile(path, kMaxSourceFileBytes);
    if (!text.ok()) continue;
    if (name == "CMakeLists.txt") {
      has_binary |= text->find("add_executable(easyscale-" + part) != std::string::npos;
    } else if (e.path().extension() == ".cc" && name.find("_test.cc") == std::string::npos) {
      texts.push_back(std::move(*text));
    }
  }
  return has_binary ? texts : std::vector<std::string>{};
}

// Every flag the chart passes is one the binary defines ("--name" or, with
// common/flags.h, "name"), so a renamed flag cannot crash-loop the pods.
TEST(Chart, PassesOnlyFlagsTheBinariesDefine) {
  auto docs = RenderChart(kCustomValues);
  ASSERT_TRUE(docs.ok()) << docs.status();
  const std::pair<const char*, const char*> workloads[] = {{"Deployment", "operator"},
                                                           {"DaemonSet", "device-plugin"}};
  int checked = 0;
  for (const auto& [kind, part] : workloads) {
    const auto sources = BinarySources(part);
    if (sources.empty()) continue;  // the part's binary is not written yet
    for (const auto& arg : Only(*docs, kind)["spec"]["template"]["spec"]["containers"][0]["args"]) {
      const std::string a = arg;
      const std::string name = a.substr(2, a.find('=') - 2);
      const bool defined = std::any_of(sources.begin(), sources.end(), [&](const std::string& t) {
        return t.find("\"--" + name + "\"") != std::string::npos ||
               t.find("\"" + name + "\"") != std::string::npos;
      });
      EXPECT_TRUE(defined) << part << " defines no flag " << name;
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "neither binary has a main() yet";
}

// The operator takes control traffic from worker pods only, metrics and
// probes from anywhere; switched off, the operator makes no per-job policies.
TEST(Chart, NetworkPolicyAdmitsWorkersToTheControlPortOnly) {
  auto docs = RenderChart();
  ASSERT_TRUE(docs.ok()) << docs.status();
  const json& policy = Only(*docs, "NetworkPolicy");
  const json& d = Only(*docs, "Deployment");
  EXPECT_TRUE(Contains(d["spec"]["template"]["metadata"]["labels"],
                       policy["spec"]["podSelector"]["matchLabels"]));
  const json& ingress = policy["spec"]["ingress"];
  ASSERT_EQ(ingress.size(), 3u);
  EXPECT_EQ(ingress[0]["from"][0]["podSelector"]["matchLabels"],
            json({{"easyscale.io/role", "worker"}}));
  EXPECT_EQ(ingress[0]["from"][0]["namespaceSelector"], json::object());
  EXPECT_EQ(ingress[0]["ports"], json::array({{{"protocol", "TCP"}, {"port", 8090}}}));
  EXPECT_FALSE(ingress[1].contains("from"));
  EXPECT_EQ(ingress[1]["ports"][0]["port"], 8080);
  EXPECT_EQ(ingress[2]["ports"][0]["port"], 8081);
  auto off = RenderChart({"--set", "networkPolicy.enabled=false"});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_TRUE(OfKind(*off, "NetworkPolicy").empty());
  EXPECT_EQ(Arg(Only(*off, "Deployment")["spec"]["template"]["spec"]["containers"][0],
                "--network-policy"),
            "--network-policy=false");
}

TEST(Chart, ServiceMonitorIsOffByDefault) {
  auto docs = RenderChart();
  ASSERT_TRUE(docs.ok()) << docs.status();
  EXPECT_TRUE(OfKind(*docs, "ServiceMonitor").empty());
}

TEST(Chart, RefusesReplicasWithoutLeaderElection) {
  auto docs = RenderChart({"--set", "operator.leaderElect=false"});
  ASSERT_FALSE(docs.ok());
  EXPECT_NE(docs.status().message().find("operator.replicas > 1 needs operator.leaderElect=true"),
            std::string::npos)
      << docs.status();
  EXPECT_TRUE(
      RenderChart({"--set", "operator.leaderElect=false", "--set", "operator.replicas=1"}).ok());
}

TEST(Chart, CrdIsTheCopyOfCrdsFolder) {
  auto source = ReadFile(SourcePath("crds/easyscale.io_easyscalejobs.yaml"), kMaxSourceFileBytes);
  auto copy = ReadFile(SourcePath("charts/easyscale/crds/easyscale.io_easyscalejobs.yaml"),
                       kMaxSourceFileBytes);
  ASSERT_TRUE(source.ok() && copy.ok());
  EXPECT_TRUE(*source == *copy)
      << "charts/easyscale/crds/ differs from crds/: run deploy/render-manifests.sh";
}

}  // namespace
}  // namespace easyscale::deploytest

namespace easyscale::deploytest {
namespace {

TEST(Manifests, AreUpToDateWithTheChart) {
  auto r = RunCommand({"/bin/bash", SourcePath("deploy/render-manifests.sh"), "--check"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exitCode, 0) << r->err;
}

TEST(Manifests, AreValidAndWired) {
  auto docs = LoadYamlFile(SourcePath("deploy/manifests/easyscale.yaml"));
  ASSERT_TRUE(docs.ok()) << docs.status();
  EXPECT_EQ((*docs)[0]["kind"], "Namespace");
  for (size_t i = 1; i < docs->size(); ++i) {
    EXPECT_EQ((*docs)[i]["metadata"].value("namespace", "easyscale-system"), "easyscale-system");
  }
  ExpectValidAndWired(*docs);
}

}  // namespace
}  // namespace easyscale::deploytest
