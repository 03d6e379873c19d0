// The test API server against hostile input, where kube-apiserver answers and
// never crashes: the crash input of issue 20 (a namespace that is not a
// label, then a watch of all pods), fields of the wrong type, invalid UTF-8,
// huge bodies, protobuf bodies, and watches that must not starve the rest.
#include <gtest/gtest.h>

#include "testing/raw_http_client.h"
#include "testing/test_util.h"
#include "wire_test.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

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
  // A custom resource's fields are its CRD's to check: 422, as kube answers.
  ExpectStatus(Call("PATCH", kJobsPath + "/j/status", R"({"status":"notanobject"})",
                    "application/merge-patch+json"),
               422, "Invalid");
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

}  // namespace
}  // namespace easyscale::op::testing
