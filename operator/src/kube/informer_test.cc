// The informer against the test API server: sync, events, resumed and expired
// watches (both 410 forms), and API errors with backoff.
#include "easyscale/operator/informer.h"

#include <gtest/gtest.h>

#include <thread>

#include "test_apiserver.h"
#include "testing/test_util.h"

namespace easyscale::op {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::Eventually;
using testing::TestApiServer;

struct Counts {
  std::mutex mu;
  std::vector<std::string> log;
  void Push(const std::string& s) {
    std::lock_guard<std::mutex> l(mu);
    log.push_back(s);
  }
  size_t Count(const std::string& s) {
    std::lock_guard<std::mutex> l(mu);
    return std::count(log.begin(), log.end(), s);
  }
};

class InformerTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto s = TestApiServer::Start({.bookmarkIntervalMs = 100, .goneAsHttpStatus = GetParam()});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    auto c = KubeClient::Create(server_->ClientConfig());
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    informer_ = std::make_unique<Informer>(
        client_.get(), kPods, InformerOptions{.ns = "default", .initialBackoff = 20ms});
    informer_->AddHandlers({
        .onAdd = [this](const json& o) { counts_.Push("add:" + ObjectKey(o)); },
        .onUpdate = [this](const json&, const json& o) { counts_.Push("update:" + ObjectKey(o)); },
        .onDelete = [this](const json& o) { counts_.Push("delete:" + ObjectKey(o)); },
    });
  }

  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<Informer> informer_;
  Counts counts_;
};

TEST_P(InformerTest, SyncsThenFollowsAddsUpdatesDeletes) {
  ASSERT_TRUE(client_->Create(kPods, "default", testing::PlainPod("before")).ok());
  informer_->Start();
  ASSERT_TRUE(WaitForSync({informer_.get()}, 5s));
  EXPECT_TRUE(informer_->Get("default/before").has_value());
  ASSERT_TRUE(client_->Create(kPods, "default", testing::PlainPod("after")).ok());
  ASSERT_TRUE(
      client_->MergePatch(kPods, "default", "after", {{"metadata", {{"labels", {{"x", "1"}}}}}})
          .ok());
  ASSERT_TRUE(client_->Delete(kPods, "default", "before").ok());
  ASSERT_TRUE(Eventually([&] { return counts_.Count("delete:default/before") == 1; }));
  EXPECT_EQ(counts_.Count("add:default/before"), 1u);
  EXPECT_EQ(counts_.Count("add:default/after"), 1u);
  EXPECT_EQ(counts_.Count("update:default/after"), 1u);
  EXPECT_EQ((*informer_->Get("default/after"))["metadata"]["labels"]["x"], "1");
  EXPECT_FALSE(informer_->Get("default/before").has_value());
}

TEST_P(InformerTest, DroppedWatchResumesWithoutRelist) {
  informer_->Start();
  ASSERT_TRUE(WaitForSync({informer_.get()}, 5s));
  const int64_t watchesBefore = server_->watchRequests();
  server_->DropWatches();
  ASSERT_TRUE(Eventually([&] { return server_->watchRequests() > watchesBefore; }));
  ASSERT_TRUE(client_->Create(kPods, "default", testing::PlainPod("p")).ok());
  ASSERT_TRUE(Eventually([&] { return informer_->Get("default/p").has_value(); }));
  EXPECT_EQ(informer_->relists(), 1);
}

TEST_P(InformerTest, ExpiredResourceVersionRelistsAndDropsUnchangedObjects) {
  ASSERT_TRUE(client_->Create(kPods, "default", testing::PlainPod("kept")).ok());
  informer_->Start();
  ASSERT_TRUE(WaitForSync({informer_.get()}, 5s));
  server_->SetCompactionWindow(0);  // every older RV is gone
  server_->DropWatches();
  ASSERT_TRUE(
      client_->Create(kPods, "default", testing::PlainPod("new")).ok());  // missed by the watch
  ASSERT_TRUE(Eventually([&] { return informer_->relists() >= 2; }));
  ASSERT_TRUE(Eventually([&] { return informer_->Get("default/new").has_value(); }));
  EXPECT_EQ(counts_.Count("add:default/new"), 1u);
  EXPECT_EQ(counts_.Count("update:default/kept"), 0u);  // same RV after relist: dropped
}

TEST_P(InformerTest, SurvivesApiErrorsWithBackoff) {
  server_->FailNextRequests(4, 500);
  informer_->Start();
  ASSERT_TRUE(WaitForSync({informer_.get()}, 10s));
  server_->FailNextRequests(3, 429);
  server_->DropWatches();
  ASSERT_TRUE(Eventually([&] {  // the client's own writes may hit the failures too
    return client_->Create(kPods, "default", testing::PlainPod("late")).ok() ||
           informer_->Get("default/late").has_value();
  }));
  ASSERT_TRUE(Eventually([&] { return informer_->Get("default/late").has_value(); }, 10s));
}

INSTANTIATE_TEST_SUITE_P(GoneForms, InformerTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Http410" : "ErrorEvent410"; });

}  // namespace
}  // namespace easyscale::op
