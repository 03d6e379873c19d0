// The test API server's wire behaviour against raw HTTP requests, where it
// must answer as kube-apiserver does: hostile input (the crash input of issue
// 20, wrong types, invalid UTF-8, huge bodies), watches that cannot starve
// other requests, watch parameters and paths as real clients send them,
// discovery, dry runs and patches.
#include "easyscale/operator/test_apiserver.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "absl/strings/str_split.h"
#include "testing/raw_http_client.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kPodsPath = "/api/v1/namespaces/default/pods";
const std::string kJobsPath = "/apis/easyscale.io/v1alpha1/namespaces/default/easyscalejobs";

struct Answer {
  int status = 0;
  httplib::Headers headers;
  std::string body;
  // The body as JSON (discarded when it is not).
  json Json() const { return json::parse(body, nullptr, false); }
  // The body as watch events, one JSON object a line.
  std::vector<json> Events() const {
    std::vector<json> events;
    for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
      events.push_back(json::parse(line, nullptr, false));
    }
    return events;
  }
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class TestApiServerWireTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({.bookmarkIntervalMs = 100}); }

  void Start(const TestApiServerOptions& o) {
    auto s = TestApiServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  Answer Call(const std::string& method, const std::string& path, const std::string& body = "",
              const std::string& contentType = "application/json",
              const httplib::Headers& headers = {}) {
    httplib::Client http("127.0.0.1", server_->port());
    http.set_read_timeout(10s);
    http.set_decompress(false);  // to see what the server sends
    httplib::Request req;
    req.method = method;
    req.path = path;
    req.headers = headers;
    req.body = body;
    if (!body.empty()) req.set_header("Content-Type", contentType);
    httplib::Result r = http.send(req);
    if (!r) return {};
    return {r->status, r->headers, r->body};
  }

  // Expects a kube Status object answer with `code` and `reason`.
  void ExpectStatus(const Answer& a, int code, const std::string& reason) {
    EXPECT_EQ(a.status, code) << a.body;
    const json s = a.Json();
    ASSERT_TRUE(s.is_object()) << a.body;
    EXPECT_EQ(s["kind"], "Status");
    EXPECT_EQ(s["code"], code);
    EXPECT_EQ(s["reason"], reason);
  }

  // The server still answers a plain list.
  void ExpectAlive() {
    const Answer a = Call("GET", "/api/v1/pods");
    EXPECT_EQ(a.status, 200);
    EXPECT_EQ(a.Json()["kind"], "PodList");
  }

  std::unique_ptr<TestApiServer> server_;
};

TEST_F(TestApiServerWireTest, NamespaceThatIsNotALabelIsInvalidAndWatchesSurviveIt) {
  // Issue 20's crash input: a pod under namespace %FF%FE, then a watch of all pods.
  const Answer created =
      Call("POST", "/api/v1/namespaces/%FF%FE/pods", PlainPod("a").dump(), "application/json");
  ExpectStatus(created, 422, "Invalid");
  EXPECT_NE(created.body.find("metadata.namespace: Invalid value"), std::string::npos);
  EXPECT_NE(created.body.find("\xEF\xBF\xBD"), std::string::npos);  // U+FFFD for the bad bytes
  ExpectStatus(Call("POST", "/api/v1/namespaces/Upper/pods", PlainPod("a").dump()), 422, "Invalid");
  ExpectStatus(Call("POST", "/api/v1/namespaces/a.b/pods", PlainPod("a").dump()), 422, "Invalid");
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("a").dump()).status, 201);
  const Answer watch = Call("GET", "/api/v1/pods?watch=true&timeoutSeconds=1");
  EXPECT_EQ(watch.status, 200);
  ASSERT_EQ(watch.Events().size(), 1u);
  EXPECT_EQ(watch.Events()[0]["object"]["metadata"]["namespace"], "default");
  // Names from the URL that are not UTF-8 come back readable in the 404.
  ExpectStatus(Call("GET", kPodsPath + "/%FF%FE"), 404, "NotFound");
  ExpectAlive();
}

TEST_F(TestApiServerWireTest, FieldsOfTheWrongTypeAreBadRequests) {
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("p").dump()).status, 201);
  const json job = EasyScaleJob("j", {{"image", "w"}, {"ests", 2}, {"maxWorkers", 2}});
  ASSERT_EQ(Call("POST", kJobsPath, job.dump()).status, 201) << Call("GET", kJobsPath).body;
  const json pod = PlainPod("q");
  const std::vector<std::pair<std::string, json>> badPods = {
      {"/metadata", "x"},
      {"/metadata/name", 5},
      {"/metadata/generateName", 5},
      {"/metadata/labels", {{"a", 1}}},
      {"/metadata/annotations", "x"},
      {"/metadata/finalizers", {1}},
      {"/metadata/ownerReferences", {{{"uid", 5}}}},
      {"/metadata/resourceVersion", 7},
      {"/metadata/namespace", json::array()},
      {"/spec", "x"},
      {"/spec/containers", "x"},
      {"/spec/containers/0/name", 5},
      {"/spec/containers/0/image", nullptr},
      {"/spec/nodeName", 1.5},
      {"/spec/terminationGracePeriodSeconds", "30"},
      {"/status", "notanobject"},
  };
  const json stored = Call("GET", kPodsPath + "/p").Json();
  for (const auto& [path, value] : badPods) {
    SCOPED_TRACE(path);
    json created = pod;
    created[json::json_pointer(path)] = value;
    ExpectStatus(Call("POST", kPodsPath, created.dump()), 400, "BadRequest");
    json updated = stored;
    updated[json::json_pointer(path)] = value;
    ExpectStatus(Call("PUT", kPodsPath + "/p", updated.dump()), 400, "BadRequest");
  }
  ExpectStatus(Call("PATCH", kPodsPath + "/p", R"({"metadata":{"labels":{"a":1}}})",
                    "application/merge-patch+json"),
               400, "BadRequest");
  ExpectStatus(Call("PATCH", kJobsPath + "/j/status", R"({"status":"notanobject"})",
                    "application/merge-patch+json"),
               400, "BadRequest");
  ExpectStatus(Call("POST", kPodsPath, "[1,2]"), 400, "BadRequest");
  ExpectStatus(Call("POST", kPodsPath, "{"), 400, "BadRequest");
  // A delete of objects stored before still works: nothing unreadable was stored.
  EXPECT_EQ(Call("DELETE", kPodsPath + "/p").status, 200);
  EXPECT_EQ(Call("DELETE", kJobsPath + "/j").status, 200);
  ExpectAlive();
}

TEST_F(TestApiServerWireTest, InvalidUtf8AnywhereIsAnswered) {
  json pod = PlainPod("u");
  std::string body = pod.dump();
  body.replace(body.find("busybox"), 7, "busy\xFF\xFE");
  ExpectStatus(Call("POST", kPodsPath, body), 400, "BadRequest");
  std::string label = PlainPod("u", {{"k", "v"}}).dump();
  label.replace(label.find("\"v\""), 3, "\"\xC3\x28\"");
  ExpectStatus(Call("POST", kPodsPath, label), 400, "BadRequest");
  EXPECT_EQ(Call("GET", "/api/v1/pods?labelSelector=a%3D%FF&watch=1&timeoutSeconds=1").status, 200);
  ExpectStatus(Call("GET", "/api/v1/pods?fieldSelector=%FF%3Dx"), 400, "BadRequest");
  EXPECT_TRUE(Call("GET", "/api/v1/namespaces/%FF/pods/%C3%28").Json().is_object());
  ExpectAlive();
}

TEST_F(TestApiServerWireTest, BodiesOverThreeMebibytesAre413) {
  json pod = PlainPod("big");
  pod["metadata"]["annotations"] = {{"big", std::string(4 << 20, 'x')}};
  ExpectStatus(Call("POST", kPodsPath, pod.dump()), 413, "RequestEntityTooLarge");
  pod["metadata"]["annotations"] = {{"big", std::string(1 << 20, 'x')}};
  EXPECT_EQ(Call("POST", kPodsPath, pod.dump()).status, 201);
  ExpectAlive();
}

TEST_F(TestApiServerWireTest, HundredOpenWatchesLeaveRoomForOtherRequests) {
  std::vector<std::unique_ptr<easyscale::testing::RawConnection>> watches;
  for (int i = 0; i < 100; ++i) {
    auto c = easyscale::testing::RawConnection::Open(server_->port());
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Send("GET /api/v1/pods?watch=true HTTP/1.1\r\nHost: x\r\n\r\n"));
    watches.push_back(std::move(*c));
  }
  ASSERT_TRUE(Eventually([&] { return server_->watchRequests() == 100; }, 10s));
  const auto start = std::chrono::steady_clock::now();
  StatusOr<easyscale::testing::RawResponse> list =
      easyscale::testing::RawRequest(server_->port(), "GET", "/api/v1/pods", "", 2s);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

TEST_F(TestApiServerWireTest, WatchesBeyondTheLimitAre429AndTheirPlacesComeBack) {
  Start({.bookmarkIntervalMs = 100, .maxWatches = 3});
  std::vector<std::unique_ptr<easyscale::testing::RawConnection>> watches;
  for (int i = 0; i < 3; ++i) {
    auto c = easyscale::testing::RawConnection::Open(server_->port());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Send("GET /api/v1/pods?watch=true HTTP/1.1\r\nHost: x\r\n\r\n"));
    watches.push_back(std::move(*c));
  }
  ASSERT_TRUE(Eventually([&] { return server_->watchRequests() == 3; }, 10s));
  ExpectStatus(Call("GET", "/api/v1/pods?watch=true&timeoutSeconds=1"), 429, "TooManyRequests");
  ExpectAlive();
  watches.clear();  // the server sees them gone at its next write (a bookmark-free 100 ms poll)
  EXPECT_TRUE(Eventually(
      [&] { return Call("GET", "/api/v1/pods?watch=true&timeoutSeconds=0").status == 200; }, 5s));
}

TEST_F(TestApiServerWireTest, WatchTakesGoAndPythonBooleans) {
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("a").dump()).status, 201);
  for (const char* yes : {"true", "True", "1", "t", "TRUE"}) {
    const Answer a = Call("GET", kPodsPath + "?timeoutSeconds=0&watch=" + yes);
    SCOPED_TRACE(yes);
    EXPECT_EQ(a.status, 200);
    ASSERT_EQ(a.Events().size(), 1u) << a.body;
    EXPECT_EQ(a.Events()[0]["type"], "ADDED");
  }
  EXPECT_EQ(Call("GET", kPodsPath + "?watch=False").Json()["kind"], "PodList");
  ExpectStatus(Call("GET", kPodsPath + "?watch=yes"), 400, "BadRequest");
  ExpectStatus(Call("GET", kPodsPath + "?watch=1&allowWatchBookmarks=maybe"), 400, "BadRequest");
}

TEST_F(TestApiServerWireTest, OnlyListAndGetAnswersAreCompressed) {
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("a").dump()).status, 201);
  const httplib::Headers gzip = {{"Accept-Encoding", "gzip"}};
  EXPECT_EQ(Call("GET", kPodsPath, "", "", gzip).Header("Content-Encoding"), "gzip");
  EXPECT_EQ(Call("GET", kPodsPath + "/a", "", "", gzip).Header("Content-Encoding"), "gzip");
  const Answer watch = Call("GET", kPodsPath + "?watch=true&timeoutSeconds=0", "", "", gzip);
  EXPECT_EQ(watch.Header("Content-Encoding"), "");
  ASSERT_EQ(watch.Events().size(), 1u) << watch.body;
  EXPECT_EQ(watch.Events()[0]["object"]["metadata"]["name"], "a");
}

TEST_F(TestApiServerWireTest, LegacyWatchPathsWatchCollectionsAndSingleObjects) {
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("a").dump()).status, 201);
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("b").dump()).status, 201);
  const json job = EasyScaleJob("j", {{"image", "w"}, {"ests", 2}, {"maxWorkers", 2}});
  ASSERT_EQ(Call("POST", kJobsPath, job.dump()).status, 201);
  EXPECT_EQ(Call("GET", "/api/v1/watch/namespaces/default/pods?timeoutSeconds=0").Events().size(),
            2u);
  EXPECT_EQ(Call("GET", "/api/v1/watch/pods?timeoutSeconds=0").Events().size(), 2u);
  const std::vector<json> one =
      Call("GET", "/api/v1/watch/namespaces/default/pods/b?timeoutSeconds=0").Events();
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0]["object"]["metadata"]["name"], "b");
  const std::vector<json> jobs =
      Call("GET",
           "/apis/easyscale.io/v1alpha1/watch/namespaces/default/easyscalejobs?"
           "timeoutSeconds=0")
          .Events();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["object"]["kind"], "EasyScaleJob");
  ExpectStatus(Call("POST", "/api/v1/watch/namespaces/default/pods", PlainPod("c").dump()), 404,
               "NotFound");
}

TEST_F(TestApiServerWireTest, BookmarksComeWhenAskedForInAnySpelling) {
  const Answer plain = Call("GET", kPodsPath + "?watch=1&timeoutSeconds=1");
  EXPECT_TRUE(plain.Events().empty()) << plain.body;
  const Answer asked =
      Call("GET", kPodsPath + "?watch=1&allowWatchBookmarks=True&timeoutSeconds=1");
  const std::vector<json> events = asked.Events();
  ASSERT_GE(events.size(), 2u) << asked.body;
  for (const json& e : events) {
    EXPECT_EQ(e["type"], "BOOKMARK");
    EXPECT_EQ(e["object"]["kind"], "Pod");
    EXPECT_EQ(e["object"]["metadata"]["resourceVersion"],
              std::to_string(server_->resourceVersion()));
  }
}

TEST_F(TestApiServerWireTest, ExpiredResourceVersionIsGone) {
  const std::string rv = std::to_string(server_->resourceVersion());
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("a").dump()).status, 201);
  server_->Compact();
  const std::vector<json> events =
      Call("GET", kPodsPath + "?watch=true&resourceVersion=" + rv).Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ERROR");
  EXPECT_EQ(events[0]["object"]["code"], 410);
  EXPECT_EQ(events[0]["object"]["reason"], "Expired");
  Start({.goneAsHttpStatus = true});
  const std::string rv2 = std::to_string(server_->resourceVersion());
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("a").dump()).status, 201);
  server_->Compact();
  ExpectStatus(Call("GET", kPodsPath + "?watch=true&resourceVersion=" + rv2), 410, "Expired");
}

TEST_F(TestApiServerWireTest, WatchListSendsInitialEventsThenTheEndBookmarkThenChanges) {
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("a").dump()).status, 201);
  ASSERT_EQ(Call("POST", kPodsPath, PlainPod("b").dump()).status, 201);
  const std::string listRv = std::to_string(server_->resourceVersion());
  std::thread writer([&] {
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(Call("POST", kPodsPath, PlainPod("c").dump()).status, 201);
  });
  const Answer a = Call("GET", kPodsPath +
                                   "?watch=1&sendInitialEvents=true&resourceVersionMatch="
                                   "NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1");
  writer.join();
  std::vector<json> events = a.Events();
  ASSERT_GE(events.size(), 4u) << a.body;
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "a");
  EXPECT_EQ(events[1]["type"], "ADDED");
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "b");
  EXPECT_EQ(events[2]["type"], "BOOKMARK");
  EXPECT_EQ(events[2]["object"]["metadata"]["resourceVersion"], listRv);
  EXPECT_EQ(events[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
  std::erase_if(events, [](const json& e) { return e["type"] == "BOOKMARK"; });
  ASSERT_EQ(events.size(), 3u) << a.body;
  EXPECT_EQ(events[2]["object"]["metadata"]["name"], "c");
  // kube's rules for the parameters of a watch list.
  ExpectStatus(Call("GET", kPodsPath + "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"),
               422, "Invalid");
  ExpectStatus(
      Call("GET", kPodsPath + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"),
      422, "Invalid");
  ExpectStatus(Call("GET", kPodsPath + "?watch=1&resourceVersionMatch=NotOlderThan"), 422,
               "Invalid");
}

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
  ASSERT_EQ(Call("PATCH", kJobsPath + "/t/status", R"({"status":{"phase":"Running","step":7}})",
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
  EXPECT_EQ(names, (std::vector<std::string>{"Name", "Phase", "ESTs", "Workers", "GPU types",
                                             "Step", "Preemptions", "Age"}));
  ASSERT_EQ(table["rows"].size(), 1u);
  const json& cells = table["rows"][0]["cells"];
  EXPECT_EQ(cells[0], "t");
  EXPECT_EQ(cells[1], "Running");
  EXPECT_EQ(cells[2], 4);
  EXPECT_TRUE(cells[3].is_null());  // no workerCount yet
  EXPECT_EQ(cells[5], 7);
  EXPECT_EQ(cells[7], "0s");
  EXPECT_EQ(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(table["rows"][0]["object"]["metadata"]["name"], "t");
  const json one = Call("GET", kJobsPath + "/t?includeObject=Object", "", "", kubectl).Json();
  EXPECT_EQ(one["rows"][0]["object"]["spec"]["ests"], 4);
  ExpectStatus(Call("GET", kJobsPath + "?includeObject=Some", "", "", kubectl), 400, "BadRequest");
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
  ExpectStatus(Call("PATCH", kPodsPath + "/p", "{}", "application/strategic-merge-patch+json"), 415,
               "UnsupportedMediaType");
  // A patch that sets a stale resourceVersion is a conditional write.
  ExpectStatus(
      Call("PATCH", kPodsPath + "/p",
           R"([{"op":"replace","path":"/metadata/resourceVersion","value":"1"}])", jsonPatch),
      409, "Conflict");
  EXPECT_EQ(Call("GET", kPodsPath + "/p").Json()["metadata"]["labels"],
            json({{"a", "2"}, {"b", "3"}}));
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

// Protobuf's wire format, to write the bodies Go clients send.
std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  return out + static_cast<char>(v);
}
std::string Field(uint32_t number, const std::string& bytes) {
  return Varint(number << 3 | 2) + Varint(bytes.size()) + bytes;
}
std::string ProtobufBody(const std::string& kind, const std::string& raw) {
  return std::string("k8s\0", 4) + Field(1, Field(1, "v1") + Field(2, kind)) + Field(2, raw);
}

TEST_F(TestApiServerWireTest, SecretsArriveAsProtobufAsHelmSendsThem) {
  const std::string meta = Field(1, "release") + Field(3, "default") +
                           Field(8, "") +  // creationTimestamp, zero
                           Field(11, Field(1, "owner") + Field(2, "helm"));
  const std::string secret = Field(1, meta) +
                             Field(2, Field(1, "r") + Field(2, std::string("\0\1", 2))) +
                             Field(3, "helm.sh/release.v1");
  const std::string protobuf = "application/vnd.kubernetes.protobuf";
  const std::string secrets = "/api/v1/namespaces/default/secrets";
  ASSERT_EQ(Call("POST", secrets, ProtobufBody("Secret", secret), protobuf).status, 201);
  const json stored = Call("GET", secrets + "/release").Json();
  EXPECT_EQ(stored["data"]["r"], "AAE=");
  EXPECT_EQ(stored["type"], "helm.sh/release.v1");
  EXPECT_EQ(stored["metadata"]["labels"]["owner"], "helm");
  const std::string update = Field(1, Field(1, "release") + Field(3, "default") +
                                          Field(6, stored["metadata"]["resourceVersion"])) +
                             Field(3, "helm.sh/release.v1");
  EXPECT_EQ(Call("PUT", secrets + "/release", ProtobufBody("Secret", update), protobuf).status,
            200);
  EXPECT_TRUE(Call("GET", secrets + "/release").Json().value("data", json::object()).empty());
  ExpectStatus(Call("POST", kPodsPath, ProtobufBody("Pod", Field(1, Field(1, "p"))), protobuf), 415,
               "UnsupportedMediaType");
  ExpectStatus(
      Call("POST", secrets, ProtobufBody("Secret", Field(1, meta)).substr(0, 20), protobuf), 415,
      "UnsupportedMediaType");
  ExpectStatus(Call("POST", secrets, ProtobufBody("Secret", Field(1, Field(13, "x"))), protobuf),
               415, "UnsupportedMediaType");  // ownerReferences: not read, so not dropped silently
  ExpectAlive();
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
