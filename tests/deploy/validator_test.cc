// The validator itself: it must fail on a wrong field name or type in the
// objects the chart renders, read YAML as Kubernetes does, and refuse schemas
// it cannot check completely.
#include <gtest/gtest.h>

#include "shapes_fixture.h"
#include "test_support.h"
#include "testing/structural_schema.h"
#include "yaml_loader.h"

namespace easyscale::deploytest {
namespace {

using nlohmann::json;

class Validator : public ShapesTest {
 protected:
  void SetUp() override {
    ShapesTest::SetUp();
    if (HasFatalFailure()) return;
    auto docs = RenderChart();
    ASSERT_TRUE(docs.ok()) << docs.status();
    for (auto& d : *docs) rendered_[d["kind"].get<std::string>()] = d;
  }

  // The single error of `object` after `mutate`.
  std::string OnlyError(const std::string& kind, const std::function<void(json&)>& mutate) {
    json object = rendered_.at(kind);
    if (!shapes_->Validate(&object).empty()) return "unmutated object already invalid";
    object = rendered_.at(kind);
    mutate(object);
    const auto errors = shapes_->Validate(&object);
    if (errors.size() != 1) return "want 1 error, got " + std::to_string(errors.size());
    return errors[0];
  }

  std::map<std::string, json> rendered_;
};

TEST_F(Validator, RejectsMisspeltFieldNames) {
  EXPECT_EQ(OnlyError("Deployment",
                      [](json& d) {
                        auto& c = d["spec"]["template"]["spec"]["containers"][0];
                        c["livenesProbe"] = c["livenessProbe"];
                        c.erase("livenessProbe");
                      }),
            "unknown field \"spec.template.spec.containers[0].livenesProbe\"");
  EXPECT_EQ(OnlyError("DaemonSet",
                      [](json& d) {
                        d["spec"]["template"]["spec"]["priorityClass"] = "system-node-critical";
                      }),
            "unknown field \"spec.template.spec.priorityClass\"");
  EXPECT_EQ(OnlyError("ClusterRole", [](json& d) { d["rules"][0]["resource"] = {"nodes"}; }),
            "unknown field \"rules[0].resource\"");
}

TEST_F(Validator, RejectsWrongTypesEnumsAndRanges) {
  EXPECT_EQ(OnlyError("DaemonSet",
                      [](json& d) {
                        d["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] = 5;
                      }),
            "spec.template.spec.volumes[0].hostPath.path: Invalid value: \"integer\": "
            "spec.template.spec.volumes[0].hostPath.path in body must be of type string: "
            "\"integer\"");
  EXPECT_EQ(
      OnlyError("Deployment", [](json& d) { d["spec"]["replicas"] = "2"; }),
      "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: "
      "\"string\"");
  EXPECT_EQ(OnlyError("Service", [](json& d) { d["spec"]["ports"][0]["port"] = 70000; }),
            "spec.ports[0].port: Invalid value: 70000: spec.ports[0].port in body should be less "
            "than or equal to 65535");
  EXPECT_EQ(OnlyError("Service", [](json& d) { d["spec"]["ports"][0]["protocol"] = "tcp"; }),
            "spec.ports[0].protocol: Unsupported value: \"tcp\": supported values: \"TCP\", "
            "\"UDP\", \"SCTP\"");
  EXPECT_EQ(
      OnlyError("Deployment",
                [](json& d) { d["spec"]["template"]["spec"]["containers"][0].erase("image"); }),
      "spec.template.spec.containers[0].image: Required value");
  EXPECT_EQ(OnlyError("ClusterRole", [](json& d) { d["metadata"]["namespace"] = "x"; }),
            "metadata.namespace: Forbidden: not allowed on cluster-scoped ClusterRole");
  EXPECT_EQ(OnlyError("Service", [](json& d) { d["metadata"]["labels"]["bad key!"] = "x"; }),
            "metadata.labels: Invalid value: \"bad key!\": not a valid label key");
}

TEST_F(Validator, ReadsYamlScalarsAsKubernetesDoes) {
  auto docs = LoadYamlDocuments(
      "a: yes\nb: 'yes'\nc: 8080\nd: 0.5\ne: ~\nf: \"true\"\ng: 1e3\nh: 07a\n---\n---\nx: 1\n",
      "t");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  const json& d = (*docs)[0];
  EXPECT_EQ(d["a"], true);
  EXPECT_EQ(d["b"], "yes");
  EXPECT_EQ(d["c"], 8080);
  EXPECT_TRUE(d["c"].is_number_integer());
  EXPECT_EQ(d["d"], 0.5);
  EXPECT_TRUE(d["e"].is_null());
  EXPECT_EQ(d["f"], "true");
  EXPECT_EQ(d["g"], 1000.0);
  EXPECT_EQ(d["h"], "07a");
  EXPECT_FALSE(LoadYamlDocuments("a: 1\na: 2\n", "dup").ok());
}

TEST_F(Validator, RefusesSchemasItCannotCheckFully) {
  auto unknown_keyword = StructuralSchema::Create(
      {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}, {"minimun", 1}}}}}});
  ASSERT_FALSE(unknown_keyword.ok());
  EXPECT_NE(unknown_keyword.status().message().find("unknown schema keyword \"minimun\""),
            std::string::npos);
  auto unknown_rule = StructuralSchema::Create(
      {{"type", "object"}, {"x-kubernetes-validations", {{{"rule", "self.a > 1"}}}}});
  ASSERT_FALSE(unknown_rule.ok());
  EXPECT_NE(unknown_rule.status().message().find("no implementation of CEL rule"),
            std::string::npos);
  EXPECT_FALSE(StructuralSchema::Create({{"properties", json::object()}}).ok()) << "no type";
}

TEST_F(Validator, PrunesNullsAndAppliesNestedDefaults) {
  auto schema = StructuralSchema::Create(
      {{"type", "object"},
       {"properties",
        {{"a",
          {{"type", "object"},
           {"default", json::object()},
           {"properties", {{"b", {{"type", "integer"}, {"default", 3}}}}}}},
         {"c", {{"type", "string"}}}}}});
  ASSERT_TRUE(schema.ok()) << schema.status();
  json v = {{"c", nullptr}};
  EXPECT_EQ(schema->Validate(&v), std::vector<std::string>{});
  EXPECT_EQ(v, json({{"a", {{"b", 3}}}}));
}

}  // namespace
}  // namespace easyscale::deploytest

namespace easyscale::deploytest {
namespace {

// The shapes also check the worker pods the operator creates (its tests can
// link easyscale_deploy_validator); this one follows the worker's contract:
// `easyscale-worker k8s` with EASYSCALE_CONTROL_URL, EASYSCALE_JOB, POD_NAME, POD_IP.
TEST_F(Validator, AcceptsAWorkerPodAndRejectsAMistypedOne) {
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", "mnist-gpu-g3-0"},
        {"namespace", "default"},
        {"labels", {{"easyscale.io/job", "mnist-gpu"}, {"easyscale.io/generation", "3"}}},
        {"ownerReferences",
         {{{"apiVersion", "easyscale.io/v1alpha1"},
           {"kind", "EasyScaleJob"},
           {"name", "mnist-gpu"},
           {"uid", "0b7f1c2e-2d7a-4c55-9e8e-6a4f1d2f9a10"},
           {"controller", true},
           {"blockOwnerDeletion", true}}}}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"automountServiceAccountToken", false},
        {"nodeName", "gpu-node-1"},
        {"containers",
         {{{"name", "worker"},
           {"image", "docker.io/easyscale/easyscale-worker:0.1.0"},
           {"args", {"k8s"}},
           {"env",
            {{{"name", "EASYSCALE_CONTROL_URL"},
              {"value", "http://easyscale-operator-control.easyscale-system.svc:8090"}},
             {{"name", "EASYSCALE_JOB"}, {"value", "default/mnist-gpu"}},
             {{"name", "POD_NAME"},
              {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
             {{"name", "POD_IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}}}},
           {"resources", {{"limits", {{"easyscale.io/gpu", 1}}}}},
           {"volumeMounts", {{{"name", "checkpoints"}, {"mountPath", "/checkpoints"}}}}}}},
        {"volumes",
         {{{"name", "checkpoints"},
           {"persistentVolumeClaim", {{"claimName", "mnist-checkpoints"}}}}}}}}};
  json valid = pod;
  EXPECT_EQ(shapes_->Validate(&valid), std::vector<std::string>{});
  pod["spec"]["containers"][0]["env"][0]["valueFrom"] = "metadata.name";
  pod["spec"]["containers"][0]["resources"]["limits"]["easyscale.io/gpu"] = "one";
  pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claim"] = "x";
  const auto errors = shapes_->Validate(&pod);
  const std::vector<std::string> want = {
      "spec.containers[0].env[0].valueFrom: Invalid value: \"string\"",
      "spec.containers[0].resources.limits.easyscale.io/gpu: Invalid value: \"one\"",
      "unknown field \"spec.volumes[0].persistentVolumeClaim.claim\""};
  ASSERT_EQ(errors.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(errors[i].rfind(want[i], 0), 0u) << errors[i];
  }
}

}  // namespace
}  // namespace easyscale::deploytest
