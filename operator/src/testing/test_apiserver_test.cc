// The test API server's REST answers as kube-apiserver gives them: /version,
// discovery, OpenAPI, Tables, dry runs, merge and JSON patches, server-side
// apply, CRDs, deletion propagation and optimistic concurrency.
#include <gtest/gtest.h>

#include "testing/test_util.h"
#include "wire_test.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

TEST_F(TestApiServerWireTest, VersionAndDiscoveryWithShortNamesAndCategories) {
  const json version = Call("GET", "/version").Json();
  EXPECT_EQ(version["major"], "1");
  EXPECT_EQ(version["gitVersion"], "v1.35.0");
  const json jobs = Call("GET", "/apis/easyscale.io/v1alpha1").Json();
  ASSERT_TRUE(jobs["resources"].is_array());
  const json& esj = jobs["resources"][0];
  EXPECT_EQ(esj["name"], "easyscalejobs");
  EXPECT_EQ(esj["singularName"], "easyscalejob");
  EXPECT_EQ(esj["shortNames"], json::array({"esj"}));
  EXPECT_EQ(esj["categories"], json::array({"easyscale", "all"}));
  const json core = Call("GET", "/api/v1").Json();
  EXPECT_EQ(core["resources"][0]["name"], "pods");
  EXPECT_EQ(core["resources"][0]["shortNames"], json::array({"po"}));
}

TEST_F(TestApiServerWireTest, OpenApiV3ServesTheCrdSchemaAndTheFieldValidationParameter) {
  const json index = Call("GET", "/openapi/v3").Json();
  const std::string url = index["paths"]["apis/easyscale.io/v1alpha1"]["serverRelativeURL"];
  EXPECT_EQ(url.rfind("/openapi/v3/apis/easyscale.io/v1alpha1?hash=", 0), 0u) << url;
  EXPECT_TRUE(index["paths"].contains("api/v1"));
  const json doc = Call("GET", url).Json();
  const json& job = doc["components"]["schemas"]["io.easyscale.v1alpha1.EasyScaleJob"];
  EXPECT_EQ(
      job["x-kubernetes-group-version-kind"],
      json::parse(R"([{"group":"easyscale.io","version":"v1alpha1","kind":"EasyScaleJob"}])"));
  EXPECT_EQ(job["required"], json::array({"spec"}));
  EXPECT_NE(job["properties"]["spec"]["properties"]["ests"]["description"].get<std::string>().find(
                "EasyScaleThreads"),
            std::string::npos);
  const json& patch =
      doc["paths"]["/apis/easyscale.io/v1alpha1/namespaces/{namespace}/easyscalejobs/{name}"]
         ["patch"];
  EXPECT_EQ(patch["x-kubernetes-group-version-kind"]["kind"], "EasyScaleJob");
  bool fieldValidation = false;
  for (const json& p : patch["parameters"]) fieldValidation |= p["name"] == "fieldValidation";
  EXPECT_TRUE(fieldValidation);
  const json core = Call("GET", "/openapi/v3/api/v1").Json();
  EXPECT_EQ(core["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
                ["x-kubernetes-preserve-unknown-fields"],
            true);
  ExpectStatus(Call("GET", "/openapi/v3/apis/nope/v1"), 404, "NotFound");
  EXPECT_EQ(Call("POST", kPodsPath + "?fieldValidation=Strict", PlainPod("a").dump()).status, 201);
  ExpectStatus(Call("POST", kPodsPath + "?fieldValidation=Lenient", PlainPod("b").dump()), 400,
               "BadRequest");
}

TEST_F(TestApiServerWireTest, TablesCarryTheCrdPrinterColumnsWhenAskedFor) {
  const json job = EasyScaleJob("t", {{"image", "w"}, {"ests", 4}, {"maxWorkers", 2}});
  ASSERT_EQ(Call("POST", kJobsPath, job.dump()).status, 201);
  ASSERT_EQ(Call("PATCH", kJobsPath + "/t/status",
                 R"({"status":{"phase":"Running","step":7,"progressPercentage":5,)"
                 R"("certificate":{"step":5,"digest":")" +
                     std::string(64, 'a') + R"("}}})",
                 "application/merge-patch+json")
                .status,
            200);
  const httplib::Headers kubectl = {
      {"Accept",
       "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta."
       "k8s.io,application/json"}};
  const json table = Call("GET", kJobsPath, "", "", kubectl).Json();
  EXPECT_EQ(table["kind"], "Table");
  EXPECT_EQ(table["apiVersion"], "meta.k8s.io/v1");
  std::vector<std::string> names;
  for (const json& c : table["columnDefinitions"]) names.push_back(c["name"]);
  EXPECT_EQ(names,
            (std::vector<std::string>{"Name", "Phase", "ESTs", "Workers", "GPU types", "Step",
                                      "Progress", "ETA", "Certified", "Preemptions", "Age"}));
  ASSERT_EQ(table["rows"].size(), 1u);
  const json& cells = table["rows"][0]["cells"];
  EXPECT_EQ(cells[0], "t");
  EXPECT_EQ(cells[1], "Running");
  EXPECT_EQ(cells[2], 4);
  EXPECT_TRUE(cells[3].is_null());  // no workerCount yet
  EXPECT_EQ(cells[5], 7);
  EXPECT_EQ(cells[6], 5);
  EXPECT_TRUE(cells[7].is_null());  // no estimate yet
  EXPECT_EQ(cells[8], 5);           // a nested field: status.certificate.step
  EXPECT_EQ(cells[10], "0s");
  EXPECT_EQ(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(table["rows"][0]["object"]["metadata"]["name"], "t");
  const json one = Call("GET", kJobsPath + "/t?includeObject=Object", "", "", kubectl).Json();
  EXPECT_EQ(one["rows"][0]["object"]["spec"]["ests"], 4);
  ExpectStatus(Call("GET", kJobsPath + "?includeObject=Some", "", "", kubectl), 400, "BadRequest");
  ExpectStatus(Call("GET", kJobsPath + "/t?includeObject=Some", "", "", kubectl), 400,
               "BadRequest");
  // Plain JSON when not asked for, and for kinds without printer columns.
  EXPECT_EQ(Call("GET", kJobsPath).Json()["kind"], "EasyScaleJobList");
  EXPECT_EQ(Call("GET", kPodsPath, "", "", kubectl).Json()["kind"], "PodList");
  const std::vector<json> events =
      Call("GET", kJobsPath + "?watch=1&timeoutSeconds=0", "", "", kubectl).Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["object"]["kind"], "Table");
  EXPECT_EQ(events[0]["object"]["rows"][0]["cells"][0], "t");
}

TEST_F(TestApiServerWireTest, DryRunChecksEverythingAndWritesNothing) {
  const int64_t rv0 = server_->resourceVersion();
  const Answer created = Call("POST", kPodsPath + "?dryRun=All", PlainPod("d").dump());
  EXPECT_EQ(created.status, 201);
  EXPECT_EQ(created.Json()["metadata"]["name"], "d");
  ExpectStatus(Call("GET", kPodsPath + "/d"), 404, "NotFound");
  ExpectStatus(Call("POST", kPodsPath + "?dryRun=All", PlainPod("Bad_Name").dump()), 422,
               "Invalid");
  ExpectStatus(Call("POST", kPodsPath + "?dryRun=Some", PlainPod("d").dump()), 400, "BadRequest");
  EXPECT_EQ(server_->resourceVersion(), rv0);

  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("d").dump()).status, 201);
  const json stored = Call("GET", kPodsPath + "/d").Json();
  json changed = stored;
  changed["metadata"]["labels"] = {{"x", "1"}};
  EXPECT_EQ(Call("PUT", kPodsPath + "/d?dryRun=All", changed.dump()).Json()["metadata"]["labels"],
            changed["metadata"]["labels"]);
  EXPECT_EQ(Call("PATCH", kPodsPath + "/d?dryRun=All", R"({"metadata":{"labels":{"y":"2"}}})",
                 "application/merge-patch+json")
                .Json()["metadata"]["labels"]["y"],
            "2");
  EXPECT_EQ(Call("PATCH", kPodsPath + "/d?dryRun=All",
                 R"([{"op":"add","path":"/metadata/labels","value":{"z":"3"}}])",
                 "application/json-patch+json")
                .status,
            200);
  EXPECT_EQ(Call("DELETE", kPodsPath + "/d?dryRun=All").status, 200);
  EXPECT_EQ(Call("DELETE", kPodsPath + "/d", R"({"dryRun":["All"]})").status, 200);
  EXPECT_EQ(Call("GET", kPodsPath + "/d").Json(), stored);
}

TEST_F(TestApiServerWireTest, JsonPatchAppliesOrAnswersAsKubeDoes) {
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("p", {{"a", "1"}}).dump()).status, 201);
  const std::string jsonPatch = "application/json-patch+json";
  const Answer patched = Call("PATCH", kPodsPath + "/p",
                              R"([{"op":"test","path":"/metadata/labels/a","value":"1"},
               {"op":"replace","path":"/metadata/labels/a","value":"2"},
               {"op":"add","path":"/metadata/labels/b","value":"3"}])",
                              jsonPatch);
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(patched.Json()["metadata"]["labels"], json({{"a", "2"}, {"b", "3"}}));
  ExpectStatus(Call("PATCH", kPodsPath + "/p",
                    R"([{"op":"test","path":"/metadata/labels/a","value":"1"}])", jsonPatch),
               422, "Invalid");
  ExpectStatus(Call("PATCH", kPodsPath + "/p",
                    R"([{"op":"remove","path":"/metadata/labels/nope"}])", jsonPatch),
               422, "Invalid");
  ExpectStatus(Call("PATCH", kPodsPath + "/p", R"([{"path":"/x"}])", jsonPatch), 400, "BadRequest");
  ExpectStatus(Call("PATCH", kPodsPath + "/p", R"({"op":"add"})", jsonPatch), 400, "BadRequest");
  ExpectStatus(Call("PATCH", kPodsPath + "/p", R"([{"op":"replace","path":"/metadata","value":1}])",
                    jsonPatch),
               400, "BadRequest");
  // A strategic merge patch without lists is a merge patch (kubectl cordon
  // sends one); one with lists would need the type's patch strategies.
  const std::string strategic = "application/strategic-merge-patch+json";
  const Answer labelled =
      Call("PATCH", kPodsPath + "/p", R"({"metadata":{"labels":{"s":"1"}}})", strategic);
  EXPECT_EQ(labelled.status, 200) << labelled.body;
  EXPECT_EQ(labelled.Json()["metadata"]["labels"]["s"], "1");
  EXPECT_EQ(Call("PATCH", kPodsPath + "/p", R"({"metadata":{"labels":{"s":null}}})", strategic)
                .status,
            200);
  ExpectStatus(
      Call("PATCH", kPodsPath + "/p", R"({"spec":{"containers":[{"name":"c"}]}})", strategic), 415,
      "UnsupportedMediaType");
  ExpectStatus(Call("PATCH", kPodsPath + "/p", R"({"$patch":"replace"})", strategic), 415,
               "UnsupportedMediaType");
  // A patch that sets a stale resourceVersion is a conditional write.
  ExpectStatus(
      Call("PATCH", kPodsPath + "/p",
           R"([{"op":"replace","path":"/metadata/resourceVersion","value":"1"}])", jsonPatch),
      409, "Conflict");
  EXPECT_EQ(Call("GET", kPodsPath + "/p").Json()["metadata"]["labels"],
            json({{"a", "2"}, {"b", "3"}}));
}

// pods/eviction, as kubectl drain uses it: the pod is marked DisruptionTarget
// and deleted gracefully; the Eviction is checked as kube-apiserver checks it.
TEST_F(TestApiServerWireTest, EvictionMarksThePodDisruptedAndDeletesIt) {
  json bound = PlainPod("e", {{"a", "1"}});
  bound["spec"]["nodeName"] = "n1";  // graceful: it waits for the kubelet
  ASSERT_EQ(Call("POST", kPodsPath, bound.dump()).status, 201);
  const json core = Call("GET", "/api/v1").Json();
  bool listed = false;
  for (const json& r : core["resources"]) {
    listed = listed || (r["name"] == "pods/eviction" && r["kind"] == "Eviction" &&
                        r["group"] == "policy" && r["version"] == "v1");
  }
  EXPECT_TRUE(listed) << "kubectl drain looks for pods/eviction in discovery";

  const json eviction = {{"apiVersion", "policy/v1"},
                         {"kind", "Eviction"},
                         {"metadata", {{"name", "e"}, {"namespace", "default"}}}};
  ExpectStatus(Call("GET", kPodsPath + "/e/eviction"), 405, "MethodNotAllowed");
  ExpectStatus(Call("POST", kPodsPath + "/e/eviction", R"({"kind":"Pod"})"), 400, "BadRequest");
  json other = eviction;
  other["metadata"]["name"] = "f";
  ExpectStatus(Call("POST", kPodsPath + "/e/eviction", other.dump()), 400, "BadRequest");
  other["metadata"]["name"] = "nope";
  ExpectStatus(Call("POST", kPodsPath + "/nope/eviction", other.dump()), 404, "NotFound");

  const Answer evicted = Call("POST", kPodsPath + "/e/eviction", eviction.dump());
  ASSERT_EQ(evicted.status, 201) << evicted.body;
  EXPECT_EQ(evicted.Json()["status"], "Success");
  const json pod = Call("GET", kPodsPath + "/e").Json();
  EXPECT_TRUE(pod["metadata"].contains("deletionTimestamp")) << pod;
  bool disrupted = false;
  for (const json& c : pod["status"].value("conditions", json::array())) {
    disrupted = disrupted || (c["type"] == "DisruptionTarget" && c["status"] == "True" &&
                              c["reason"] == "EvictionByEvictionAPI");
  }
  EXPECT_TRUE(disrupted) << pod;
}

TEST_F(TestApiServerWireTest, OrphanDeletionKeepsDependentsWithoutTheOwnerReference) {
  const json job = EasyScaleJob("j", {{"image", "w"}, {"ests", 2}, {"maxWorkers", 2}});
  for (const char* name : {"kept", "gone"}) {
    json owner = job;
    owner["metadata"]["name"] = name;
    const json made = Call("POST", kJobsPath, owner.dump()).Json();
    json pod = PlainPod(std::string(name) + "-pod");
    pod["metadata"]["ownerReferences"] = {{{"apiVersion", "easyscale.io/v1alpha1"},
                                           {"kind", "EasyScaleJob"},
                                           {"name", name},
                                           {"uid", made["metadata"]["uid"]}}};
    ASSERT_EQ(Call("POST", kPodsPath, pod.dump()).status, 201);
  }
  ExpectStatus(Call("DELETE", kJobsPath + "/kept", R"({"propagationPolicy":"Sideways"})"), 400,
               "BadRequest");
  EXPECT_EQ(Call("DELETE", kJobsPath + "/kept", R"({"propagationPolicy":"Orphan"})").status, 200);
  EXPECT_EQ(Call("DELETE", kJobsPath + "/gone?propagationPolicy=Background").status, 200);
  const json orphan = Call("GET", kPodsPath + "/kept-pod").Json();
  EXPECT_EQ(orphan["metadata"]["name"], "kept-pod");
  EXPECT_FALSE(orphan["metadata"].contains("ownerReferences"));
  ExpectStatus(Call("GET", kPodsPath + "/gone-pod"), 404, "NotFound");
  ExpectStatus(Call("GET", kJobsPath + "/kept"), 404, "NotFound");
}

TEST_F(TestApiServerWireTest, ServerSideApplyCreatesThenMergesAndNeedsAFieldManager) {
  const std::string apply = "application/apply-patch+yaml";
  json job = EasyScaleJob("a", {{"image", "w"}, {"ests", 4}, {"maxWorkers", 2}});
  ExpectStatus(Call("PATCH", kJobsPath + "/a", job.dump(), apply), 400, "BadRequest");
  const Answer created = Call("PATCH", kJobsPath + "/a?fieldManager=me", job.dump(), apply);
  ASSERT_EQ(created.status, 200) << created.body;
  EXPECT_EQ(Call("GET", kJobsPath + "/a").Json()["spec"]["maxWorkers"], 2);
  job["spec"]["maxWorkers"] = 3;
  job["metadata"]["labels"] = {{"team", "a"}};
  const json applied = Call("PATCH", kJobsPath + "/a?fieldManager=me", job.dump(), apply).Json();
  EXPECT_EQ(applied["spec"]["maxWorkers"], 3);
  EXPECT_EQ(applied["metadata"]["labels"]["team"], "a");
  EXPECT_EQ(applied["metadata"]["generation"], 2);
  ExpectStatus(Call("PATCH", kJobsPath + "/b?fieldManager=me", job.dump(), apply), 400,
               "BadRequest");  // the body names another object
  json pod = PlainPod("a");
  ExpectStatus(Call("PATCH", kJobsPath + "/a?fieldManager=me", pod.dump(), apply), 400,
               "BadRequest");  // no kind and apiVersion of the URL's resource
  EXPECT_EQ(Call("PATCH", kJobsPath + "/c?fieldManager=me&dryRun=All",
                 EasyScaleJob("c", {{"image", "w"}, {"ests", 1}}).dump(), apply)
                .status,
            200);
  ExpectStatus(Call("GET", kJobsPath + "/c"), 404, "NotFound");
}

TEST_F(TestApiServerWireTest, CrdsAreStoredEstablishedAndOtherBodiesThanJsonAre415) {
  const std::string crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", "things.example.com"}}},
              {"spec",
               {{"group", "example.com"},
                {"names", {{"plural", "things"}, {"kind", "Thing"}}},
                {"scope", "Namespaced"},
                {"versions", {{{"name", "v1"}, {"served", true}, {"storage", true}}}}}}};
  const json made = Call("POST", crds, crd.dump()).Json();
  EXPECT_EQ(made["status"]["acceptedNames"]["kind"], "Thing");
  EXPECT_EQ(made["status"]["storedVersions"], json::array({"v1"}));
  bool established = false;
  for (const json& c : made["status"]["conditions"]) {
    established |= c["type"] == "Established" && c["status"] == "True";
  }
  EXPECT_TRUE(established);
  crd["metadata"]["name"] = "wrong.example.com";
  ExpectStatus(Call("POST", crds, crd.dump()), 422, "Invalid");
  ExpectStatus(Call("POST", kPodsPath, PlainPod("p").dump(), "application/vnd.kubernetes.protobuf"),
               415, "UnsupportedMediaType");
  EXPECT_EQ(Call("POST", kPodsPath, PlainPod("p").dump(), "application/json; charset=utf-8").status,
            201);
}

TEST_F(TestApiServerWireTest, ForegroundDeletionWaitsForTheDependents) {
  const json made =
      Call("POST", kJobsPath, EasyScaleJob("j", {{"image", "w"}, {"ests", 2}}).dump()).Json();
  json pod = PlainPod("dep");
  pod["metadata"]["ownerReferences"] = {{{"apiVersion", "easyscale.io/v1alpha1"},
                                         {"kind", "EasyScaleJob"},
                                         {"name", "j"},
                                         {"uid", made["metadata"]["uid"]}}};
  pod["metadata"]["finalizers"] = {"example.com/hold"};  // the dependent waits too
  ASSERT_EQ(Call("POST", kPodsPath, pod.dump()).status, 201);
  const json waiting =
      Call("DELETE", kJobsPath + "/j", R"({"propagationPolicy":"Foreground"})").Json();
  EXPECT_EQ(waiting["metadata"]["finalizers"], json::array({"foregroundDeletion"}));
  EXPECT_TRUE(waiting["metadata"].contains("deletionTimestamp"));
  EXPECT_TRUE(Call("GET", kPodsPath + "/dep").Json()["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(Call("GET", kJobsPath + "/j").status, 200);  // still there: its pod is
  ASSERT_EQ(Call("PATCH", kPodsPath + "/dep", R"({"metadata":{"finalizers":null}})",
                 "application/merge-patch+json")
                .status,
            200);
  ExpectStatus(Call("GET", kPodsPath + "/dep"), 404, "NotFound");
  ExpectStatus(Call("GET", kJobsPath + "/j"), 404, "NotFound");
  // Without dependents it goes at once.
  ASSERT_EQ(Call("POST", kJobsPath, EasyScaleJob("k", {{"image", "w"}, {"ests", 2}}).dump()).status,
            201);
  EXPECT_EQ(Call("DELETE", kJobsPath + "/k?propagationPolicy=Foreground").status, 200);
  ExpectStatus(Call("GET", kJobsPath + "/k"), 404, "NotFound");
}

TEST_F(TestApiServerWireTest, UpdateFromAStaleObjectIsConflict) {
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("p").dump()).status, 201);
  const json first = Call("GET", kPodsPath + "/p").Json();
  json next = first;
  next["metadata"]["labels"] = {{"v", "1"}};
  ASSERT_EQ(Call("PUT", kPodsPath + "/p", next.dump()).status, 200);
  json stale = first;
  stale["metadata"]["labels"] = {{"v", "2"}};
  ExpectStatus(Call("PUT", kPodsPath + "/p", stale.dump()), 409, "Conflict");
  EXPECT_EQ(Call("GET", kPodsPath + "/p").Json()["metadata"]["labels"]["v"], "1");
}

}  // namespace
}  // namespace easyscale::op::testing
