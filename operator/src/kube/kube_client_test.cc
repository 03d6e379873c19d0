// The client against the test API server over HTTPS: verbs, error codes,
// status subresource, selectors, finalizers, garbage collection and watches.
#include "easyscale/operator/kube_client.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <thread>

#include "easyscale/common/file_io.h"
#include "easyscale/operator/event_recorder.h"
#include "test_apiserver.h"
#include "testing/test_util.h"

namespace easyscale::op {
namespace {

using nlohmann::json;
using testing::TestApiServer;

json JobObject(const std::string& name, int ests) {
  return {{"apiVersion", "easyscale.io/v1alpha1"},
          {"kind", "EasyScaleJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"image", "easyscale/worker:test"}, {"ests", ests}, {"maxWorkers", ests}}}};
}

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s =
        TestApiServer::Start({.tls = true, .token = "secret-token", .bookmarkIntervalMs = 200});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    dir_ =
        std::filesystem::temp_directory_path() / ("kube_client_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    const std::string kubeconfig = (dir_ / "kubeconfig").string();
    ASSERT_TRUE(server_->WriteKubeconfig(kubeconfig).ok());
    StatusOr<KubeConfig> config = LoadKubeconfigFile(kubeconfig);
    ASSERT_TRUE(config.ok()) << config.status();
    auto c = KubeClient::Create(*config);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<KubeClient> client_;
  std::filesystem::path dir_;
};

TEST_F(KubeClientTest, CrudAndErrorCodesOverHttpsWithCaAndToken) {
  StatusOr<json> created =
      client_->Create(kPods, "default", testing::PlainPod("a", {{"app", "x"}}));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)["status"]["phase"], "Pending");
  EXPECT_FALSE((*created)["metadata"]["uid"].get<std::string>().empty());
  EXPECT_TRUE(
      absl::IsAlreadyExists(client_->Create(kPods, "default", testing::PlainPod("a")).status()));
  EXPECT_TRUE(absl::IsNotFound(client_->Get(kPods, "default", "zzz").status()));

  json stale = *created;
  json fresh = *created;
  fresh["metadata"]["labels"]["app"] = "y";
  ASSERT_TRUE(client_->Update(kPods, fresh).ok());
  EXPECT_TRUE(absl::IsAborted(client_->Update(kPods, stale).status()));  // 409 Conflict

  StatusOr<json> bad = client_->Create(kEasyScaleJobs, "default", JobObject("bad", 0));
  ASSERT_TRUE(absl::IsInvalidArgument(bad.status()));  // 422 from the CRD's schema
  EXPECT_NE(bad.status().message().find("spec.ests"), std::string::npos) << bad.status();

  ASSERT_TRUE(client_->Create(kPods, "default", testing::PlainPod("b", {{"app", "x"}})).ok());
  StatusOr<json> list = client_->List(kPods, "default", {.labelSelector = "app=x"});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ((*list)["items"].size(), 1u);
  EXPECT_EQ((*list)["items"][0]["metadata"]["name"], "b");
  EXPECT_FALSE((*list)["metadata"]["resourceVersion"].get<std::string>().empty());
  list = client_->List(kPods, "", {.fieldSelector = "metadata.name=a"});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ((*list)["items"].size(), 1u);
  EXPECT_TRUE(absl::IsInvalidArgument(
      client_->List(kPods, "", {.fieldSelector = "spec.bogus=1"}).status()));

  ASSERT_TRUE(client_->Delete(kPods, "default", "a").ok());
  EXPECT_TRUE(absl::IsNotFound(client_->Delete(kPods, "default", "a")));
}

TEST_F(KubeClientTest, WrongTokenAndUntrustedCaAreRejected) {
  KubeConfig c = server_->ClientConfig();
  c.token = "wrong";
  auto wrongToken = KubeClient::Create(c);
  ASSERT_TRUE(wrongToken.ok());
  EXPECT_TRUE(absl::IsUnauthenticated((*wrongToken)->List(kPods, "").status()));
  auto other = testing::MakeSelfSignedCert("other");
  ASSERT_TRUE(other.ok());
  c = server_->ClientConfig();
  c.caPem = other->certPem;
  auto untrusted = KubeClient::Create(c);
  ASSERT_TRUE(untrusted.ok());
  EXPECT_TRUE(absl::IsUnavailable((*untrusted)->List(kPods, "").status()));
  c.insecureSkipTlsVerify = true;
  auto insecure = KubeClient::Create(c);
  ASSERT_TRUE(insecure.ok());
  EXPECT_TRUE((*insecure)->List(kPods, "").ok());
}

TEST_F(KubeClientTest, StatusSubresourceSplitsSpecAndStatus) {
  StatusOr<json> job = client_->Create(kEasyScaleJobs, "default", JobObject("j", 4));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ((*job)["metadata"]["generation"], 1);
  json withStatus = *job;
  withStatus["status"] = {{"phase", "Running"}};
  withStatus["spec"]["ests"] = 8;  // ignored by /status
  StatusOr<json> s = client_->UpdateStatus(kEasyScaleJobs, withStatus);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)["status"]["phase"], "Running");
  EXPECT_EQ((*s)["spec"]["ests"], 4);
  EXPECT_EQ((*s)["metadata"]["generation"], 1);
  json specChange = *s;
  specChange["spec"]["maxWorkers"] = 2;          // ests is immutable (the CRD's rule)
  specChange["status"] = {{"phase", "Hacked"}};  // ignored by the main resource
  StatusOr<json> u = client_->Update(kEasyScaleJobs, specChange);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ((*u)["metadata"]["generation"], 2);
  EXPECT_EQ((*u)["status"]["phase"], "Running");
  StatusOr<json> p = client_->MergePatch(kEasyScaleJobs, "default", "j",
                                         {{"status", {{"step", 7}}}}, /*status=*/true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)["status"]["step"], 7);
  EXPECT_EQ((*p)["status"]["phase"], "Running");
}

TEST_F(KubeClientTest, FinalizersDelayDeletionAndOwnedPodsAreCollected) {
  json j = JobObject("owner", 2);
  j["metadata"]["finalizers"] = {"easyscale.io/cleanup"};
  StatusOr<json> job = client_->Create(kEasyScaleJobs, "default", j);
  ASSERT_TRUE(job.ok());
  json pod = testing::PlainPod("owned");
  pod["metadata"]["ownerReferences"] = {{{"apiVersion", "easyscale.io/v1alpha1"},
                                         {"kind", "EasyScaleJob"},
                                         {"name", "owner"},
                                         {"uid", (*job)["metadata"]["uid"]},
                                         {"controller", true}}};
  ASSERT_TRUE(client_->Create(kPods, "default", pod).ok());
  ASSERT_TRUE(client_->Delete(kEasyScaleJobs, "default", "owner").ok());
  StatusOr<json> terminating = client_->Get(kEasyScaleJobs, "default", "owner");
  ASSERT_TRUE(terminating.ok());
  EXPECT_TRUE((*terminating)["metadata"].contains("deletionTimestamp"));
  EXPECT_TRUE(client_->Get(kPods, "default", "owned").ok());  // owner still exists
  json done = *terminating;
  done["metadata"]["finalizers"] = json::array();
  ASSERT_TRUE(client_->Update(kEasyScaleJobs, done).ok());
  EXPECT_TRUE(absl::IsNotFound(client_->Get(kEasyScaleJobs, "default", "owner").status()));
  EXPECT_TRUE(absl::IsNotFound(client_->Get(kPods, "default", "owned").status()));
}

TEST_F(KubeClientTest, BoundPodsTerminateGracefullyUntilTheKubeletConfirms) {
  json pod = testing::PlainPod("bound");
  pod["spec"]["nodeName"] = "n1";
  pod["spec"]["terminationGracePeriodSeconds"] = 20;
  ASSERT_TRUE(client_->Create(kPods, "default", pod).ok());
  ASSERT_TRUE(client_->Delete(kPods, "default", "bound").ok());
  StatusOr<json> terminating = client_->Get(kPods, "default", "bound");
  ASSERT_TRUE(terminating.ok());
  EXPECT_TRUE((*terminating)["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ((*terminating)["metadata"]["deletionGracePeriodSeconds"], 20);
  ASSERT_TRUE(client_->Delete(kPods, "default", "bound", 0).ok());  // the kubelet's confirmation
  EXPECT_TRUE(absl::IsNotFound(client_->Get(kPods, "default", "bound").status()));
  ASSERT_TRUE(client_->Create(kPods, "default", testing::PlainPod("unbound")).ok());
  ASSERT_TRUE(client_->Delete(kPods, "default", "unbound").ok());  // no kubelet to wait for
  EXPECT_TRUE(absl::IsNotFound(client_->Get(kPods, "default", "unbound").status()));
}

TEST_F(KubeClientTest, SecretsKeepBase64DataAndFoldStringData) {
  const json secret = {{"metadata", {{"name", "token"}}},
                       {"data", {{"a", "czNjcmV0"}}},  // "s3cret"
                       {"stringData", {{"b", "plain"}}}};
  ASSERT_TRUE(client_->Create(kSecrets, "default", secret).ok());
  StatusOr<json> stored = client_->Get(kSecrets, "default", "token");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ((*stored)["data"], json({{"a", "czNjcmV0"}, {"b", "cGxhaW4="}}));
  EXPECT_FALSE(stored->contains("stringData"));
  EXPECT_EQ((*stored)["type"], "Opaque");
  const json bad = {{"metadata", {{"name", "bad"}}}, {"data", {{"a", "not base64!"}}}};
  StatusOr<json> rejected = client_->Create(kSecrets, "default", bad);
  EXPECT_TRUE(absl::IsInvalidArgument(rejected.status())) << rejected.status();  // 400

  const json policy = {{"metadata", {{"name", "workers"}}},
                       {"spec", {{"podSelector", {{"matchLabels", {{"easyscale.io/job", "j"}}}}}}}};
  ASSERT_TRUE(client_->Create(kNetworkPolicies, "default", policy).ok());
  StatusOr<json> policies = client_->List(kNetworkPolicies, "default");
  ASSERT_TRUE(policies.ok()) << policies.status();
  EXPECT_EQ((*policies)["items"].size(), 1u);
}

TEST_F(KubeClientTest, WatchStreamsChangesAndBookmarksFromListRv) {
  StatusOr<json> list = client_->List(kPods, "default");
  ASSERT_TRUE(list.ok());
  const std::string rv = (*list)["metadata"]["resourceVersion"];
  std::vector<WatchEvent> seen;
  WatchCanceller cancel;
  std::thread watcher([&] {
    Status s = client_->Watch(
        kPods, "default", {.resourceVersion = rv, .labelSelector = "w=1"},
        [&](const WatchEvent& e) {
          seen.push_back(e);
          return !(e.type == "BOOKMARK" && seen.size() >= 4);
        },
        &cancel);
    EXPECT_TRUE(s.ok()) << s;
  });
  ASSERT_TRUE(client_->Create(kPods, "default", testing::PlainPod("w1", {{"w", "1"}})).ok());
  ASSERT_TRUE(client_->Create(kPods, "default", testing::PlainPod("other")).ok());
  ASSERT_TRUE(
      client_->MergePatch(kPods, "default", "w1", {{"metadata", {{"labels", {{"w", "0"}}}}}}).ok());
  watcher.join();
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen[0].type, "ADDED");
  EXPECT_EQ(seen[0].object["metadata"]["name"], "w1");
  EXPECT_EQ(seen[1].type, "DELETED");  // left the selector
  EXPECT_EQ(seen.back().type, "BOOKMARK");
  EXPECT_GE(std::stoll(ResourceVersionOf(seen.back().object)), std::stoll(rv) + 3);
}

TEST_F(KubeClientTest, ExpiredResourceVersionIsOutOfRange) {
  StatusOr<json> list = client_->List(kPods, "default");
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE(client_->Create(kPods, "default", testing::PlainPod("x")).ok());
  server_->Compact();
  Status s =
      client_->Watch(kPods, "default", {.resourceVersion = (*list)["metadata"]["resourceVersion"]},
                     [](const WatchEvent&) { return true; });
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;  // ERROR event with code 410
}

TEST_F(KubeClientTest, CancelEndsAnIdleWatch) {
  WatchCanceller cancel;
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel.Cancel();
  });
  const auto start = std::chrono::steady_clock::now();
  Status s = client_->Watch(
      kNodes, "", {.allowBookmarks = false}, [](const WatchEvent&) { return true; }, &cancel);
  t.join();
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(KubeClientTest, StatusWriteRetriesOnConflictByReapplying) {
  StatusOr<json> job = client_->Create(kEasyScaleJobs, "default", JobObject("c", 2));
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(
      client_
          ->MergePatch(kEasyScaleJobs, "default", "c", {{"status", {{"phase", "Running"}}}}, true)
          .ok());
  int calls = 0;
  StatusOr<json> out = UpdateStatusWithRetry(*client_, kEasyScaleJobs, *job, [&](json& o) {
    ++calls;
    o["status"]["step"] = 5;
  });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(calls, 2);  // the stale copy got 409, the re-read one went through
  EXPECT_EQ((*out)["status"]["step"], 5);
  EXPECT_EQ((*out)["status"]["phase"], "Running");  // the other writer's change survived
}

TEST_F(KubeClientTest, RepeatedEventsAggregateIntoACount) {
  StatusOr<json> job = client_->Create(kEasyScaleJobs, "default", JobObject("e", 2));
  ASSERT_TRUE(job.ok());
  EventRecorder recorder(client_.get(), "easyscale-operator", "test");
  recorder.Warning(*job, "Failed", "Invalid: spec.ests");
  recorder.Warning(*job, "Failed", "Invalid: spec.ests");
  recorder.Normal(*job, "Scheduled", "2 workers");
  StatusOr<json> events =
      client_->List(kEvents, "default", {.fieldSelector = "involvedObject.name=e,reason=Failed"});
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ((*events)["items"].size(), 1u);
  const json& e = (*events)["items"][0];
  EXPECT_EQ(e["count"], 2);
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["involvedObject"]["kind"], "EasyScaleJob");
  EXPECT_EQ(e["involvedObject"]["uid"], (*job)["metadata"]["uid"]);
}

// A server closes a keep-alive connection left idle (kube-apiserver after 90
// s) with a TLS close_notify; the next request must not go out on it.
TEST(KubeClientIdle, ARequestAfterTheServerClosedTheIdleConnectionSucceeds) {
  auto server = TestApiServer::Start({.tls = true, .keepAliveTimeoutSeconds = 1});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = KubeClient::Create((*server)->ClientConfig());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Create(kPods, "default", testing::PlainPod("idle", {{"app", "x"}})).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  StatusOr<json> pod = (*client)->Get(kPods, "default", "idle");
  EXPECT_TRUE(pod.ok()) << pod.status();
}

// A pod's service account token expires; kubelet writes the new one into the
// same file first. The client reads it again and carries on; a token that no
// file replaces is refused with Unauthenticated.
TEST_F(KubeClientTest, ATokenKubeletRotatesIsReadAgainAfterTheOldOneIsRefused) {
  const std::string tokenFile = (dir_ / "token").string();
  ASSERT_TRUE(WriteFileAtomic(tokenFile, "secret-token\n").ok());
  KubeConfig config = server_->ClientConfig();
  config.tokenFile = tokenFile;
  auto client = KubeClient::Create(config);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->List(kPods, "default").ok());

  server_->SetToken("rotated-token");
  ASSERT_TRUE(WriteFileAtomic(tokenFile, "rotated-token\n").ok());
  StatusOr<json> pods = (*client)->List(kPods, "default");
  EXPECT_TRUE(pods.ok()) << pods.status();
  Status watched = (*client)->Watch(kPods, "default", {.timeoutSeconds = 1},
                                    [](const WatchEvent&) { return true; });
  EXPECT_TRUE(watched.ok()) << watched;

  server_->SetToken("a-token-nobody-has");
  pods = (*client)->List(kPods, "default");
  EXPECT_TRUE(absl::IsUnauthenticated(pods.status())) << pods.status();
}

// kube-apiserver sheds load with 429 and Retry-After (API Priority and
// Fairness): the client waits and sends again, as client-go does. A 500
// without Retry-After is the caller's to handle.
TEST_F(KubeClientTest, A429WithRetryAfterIsWaitedOutAndSentAgain) {
  ASSERT_TRUE(client_->Create(kPods, "default", testing::PlainPod("busy", {{"app", "x"}})).ok());
  server_->FailNextRequests(2, 429);  // each with Retry-After: 1
  const auto start = std::chrono::steady_clock::now();
  StatusOr<json> pod = client_->Get(kPods, "default", "busy");
  EXPECT_TRUE(pod.ok()) << pod.status();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  server_->FailNextRequests(1, 500);
  EXPECT_TRUE(absl::IsUnavailable(client_->Get(kPods, "default", "busy").status()));
}

TEST(TestApiServerDiscovery, ServesLegacyDiscoveryForKubectl) {
  auto server = TestApiServer::Start({});
  ASSERT_TRUE(server.ok());
  httplib::Client http("127.0.0.1", (*server)->port());
  auto groups = http.Get("/apis");
  ASSERT_TRUE(groups && groups->status == 200);
  EXPECT_NE(groups->body.find("\"easyscale.io/v1alpha1\""), std::string::npos);
  auto core = http.Get("/api/v1");
  ASSERT_TRUE(core && core->status == 200);
  const json list = json::parse(core->body);
  EXPECT_EQ(list["kind"], "APIResourceList");
  bool podsStatus = false;
  for (const json& r : list["resources"]) podsStatus = podsStatus || r["name"] == "pods/status";
  EXPECT_TRUE(podsStatus);
  auto jobs = http.Get("/apis/easyscale.io/v1alpha1");
  ASSERT_TRUE(jobs && jobs->status == 200);
  EXPECT_NE(jobs->body.find("\"easyscalejobs/status\""), std::string::npos);
  EXPECT_EQ(http.Get("/apis/nope/v1")->status, 404);
}

TEST(KubeConfigTest, ErrorsNameTheField) {
  const std::string path =
      std::filesystem::temp_directory_path() / ("kc_" + std::to_string(getpid()));
  ASSERT_TRUE(WriteFileAtomic(path,
                              "current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: "
                              "k\nclusters:\n- name: k\n  cluster:\n    server: ftp://x\n")
                  .ok());
  StatusOr<KubeConfig> c = LoadKubeconfigFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("clusters[k].cluster.server"), std::string::npos)
      << c.status();
  ASSERT_TRUE(WriteFileAtomic(
                  path,
                  "current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: "
                  "u\nclusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:1\n    "
                  "certificate-authority-data: '!!!'\nusers:\n- name: u\n  user: {}\n")
                  .ok());
  c = LoadKubeconfigFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("certificate-authority-data"), std::string::npos)
      << c.status();
  std::filesystem::remove(path);
  EXPECT_FALSE(LoadKubeconfigFile("/nonexistent/kubeconfig").ok());
}

}  // namespace
}  // namespace easyscale::op
