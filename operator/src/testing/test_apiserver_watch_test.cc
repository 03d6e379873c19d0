// Watches as real clients send them: Go's and Python's booleans, never
// compressed, legacy /watch/ paths, bookmarks, 410 for expired
// resourceVersions, and WatchList (sendInitialEvents), which kubectl wait uses.
#include <gtest/gtest.h>

#include <thread>

#include "testing/test_util.h"
#include "wire_test.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

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

}  // namespace
}  // namespace easyscale::op::testing
