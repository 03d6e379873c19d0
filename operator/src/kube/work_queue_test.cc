#include "easyscale/operator/work_queue.h"

#include <gtest/gtest.h>

#include <thread>

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

}  // namespace
}  // namespace easyscale::op
