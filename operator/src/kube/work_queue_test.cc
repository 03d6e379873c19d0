#include "easyscale/operator/work_queue.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace easyscale::op {
namespace {

using namespace std::chrono_literals;

TEST(WorkQueue, DedupsQueuedKeys) {
  WorkQueue q;
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(q.Get(), "a");
  EXPECT_EQ(q.Get(), "b");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueue, KeyAddedWhileProcessingIsRequeuedOnDoneOnly) {
  WorkQueue q;
  q.Add("a");
  ASSERT_EQ(q.Get(), "a");
  q.Add("a");  // dirty while processing: not handed to a second worker
  q.Add("a");
  EXPECT_EQ(q.Len(), 0u);
  q.Done("a");
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(q.Get(), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueue, RateLimitedBackoffDoublesAndForgetResets) {
  WorkQueue q(BackoffOptions{.base = 20ms, .max = 100ms});
  EXPECT_EQ(q.NextBackoff("k"), 20ms);
  q.AddRateLimited("k");
  EXPECT_EQ(q.NumRequeues("k"), 1);
  EXPECT_EQ(q.NextBackoff("k"), 40ms);
  EXPECT_EQ(q.Len(), 0u);  // not before its delay
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(q.Get(), "k");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 15ms);
  q.Done("k");
  q.AddRateLimited("k");
  q.AddRateLimited("k");
  q.AddRateLimited("k");
  EXPECT_EQ(q.NextBackoff("k"), 100ms);  // capped
  q.Forget("k");
  EXPECT_EQ(q.NumRequeues("k"), 0);
  EXPECT_EQ(q.NextBackoff("k"), 20ms);
}

TEST(WorkQueue, ShutDownReleasesBlockedWorkers) {
  WorkQueue q;
  std::optional<std::string> got = "x";
  std::thread worker([&] { got = q.Get(); });
  std::this_thread::sleep_for(20ms);
  q.ShutDown();
  worker.join();
  EXPECT_FALSE(got.has_value());
  q.Add("late");  // ignored after shutdown
  EXPECT_EQ(q.Len(), 0u);
}

// What client-go's queue metrics see: each real add raises the depth, a key
// handed out lowers it and says how long it waited since its first add, Done
// says how long it was worked on.
class RecordingMetrics : public WorkQueueMetrics {
 public:
  void Added(size_t depth) override {
    ++adds;
    this->depth = depth;
  }
  void Started(size_t depth, std::chrono::duration<double> queued) override {
    this->depth = depth;
    waits.push_back(queued.count());
  }
  void Finished(std::chrono::duration<double> worked) override { works.push_back(worked.count()); }
  int adds = 0;
  size_t depth = 0;
  std::vector<double> waits;
  std::vector<double> works;
};

TEST(WorkQueue, MetricsSeeAddsDepthQueueAndWorkDurations) {
  RecordingMetrics m;
  WorkQueue q({}, &m);
  q.Add("a");
  std::this_thread::sleep_for(30ms);
  q.Add("a");  // already queued: no add, and the wait counts from the first
  q.Add("b");
  EXPECT_EQ(m.adds, 2);
  EXPECT_EQ(m.depth, 2u);
  ASSERT_EQ(q.Get(), "a");
  EXPECT_EQ(m.depth, 1u);
  ASSERT_EQ(m.waits.size(), 1u);
  EXPECT_GE(m.waits[0], 0.025);
  q.Add("a");  // dirty while processing: counted, as client-go does
  EXPECT_EQ(m.adds, 3);
  EXPECT_EQ(m.depth, 2u);
  std::this_thread::sleep_for(20ms);
  q.Done("a");
  ASSERT_EQ(m.works.size(), 1u);
  EXPECT_GE(m.works[0], 0.015);
  ASSERT_EQ(q.Get(), "b");
  ASSERT_EQ(q.Get(), "a");
  EXPECT_EQ(m.depth, 0u);
  EXPECT_EQ(m.waits.size(), 3u);
  EXPECT_GE(m.waits[2], 0.015);  // since its add during the first run
}

}  // namespace
}  // namespace easyscale::op
