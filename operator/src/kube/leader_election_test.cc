// Two electors on one Lease: one leads; the other takes over when the leader
// stops renewing, and at once when the leader releases.
#include "easyscale/operator/leader_election.h"

#include <gtest/gtest.h>

#include <thread>

#include "test_apiserver.h"
#include "testing/test_util.h"

namespace easyscale::op {
namespace {

using namespace std::chrono_literals;
using testing::Eventually;

LeaderElectionConfig Fast(const std::string& id) {
  return {.ns = "default",
          .name = "lock",
          .identity = id,
          .leaseDuration = 800ms,
          .renewDeadline = 600ms,
          .retryPeriod = 100ms};
}

TEST(LeaderElection, OneLeaderThenTakeoverOnExpiryAndRelease) {
  auto server = testing::TestApiServer::Start({});
  ASSERT_TRUE(server.ok());
  auto ca = KubeClient::Create((*server)->ClientConfig());
  auto cb = KubeClient::Create((*server)->ClientConfig());
  ASSERT_TRUE(ca.ok() && cb.ok());
  std::atomic<int> aStops{0};
  LeaderElectionConfig configA = Fast("a");
  configA.onStoppedLeading = [&] { ++aStops; };
  auto a = std::make_unique<LeaderElector>(ca->get(), configA);
  LeaderElector b(cb->get(), Fast("b"));
  a->Start();
  ASSERT_TRUE(Eventually([&] { return a->IsLeader(); }, 3s));
  b.Start();
  std::this_thread::sleep_for(1500ms);  // longer than the lease: a keeps renewing
  EXPECT_TRUE(a->IsLeader());
  EXPECT_FALSE(b.IsLeader());

  // a's API calls fail: it cannot renew, steps down, and b takes over.
  (*server)->FailNextRequests(1000000, 500);
  ASSERT_TRUE(Eventually([&] { return !a->IsLeader(); }, 3s));
  EXPECT_EQ(aStops.load(), 1);
  (*server)->FailNextRequests(0, 500);
  ASSERT_TRUE(Eventually([&] { return a->IsLeader() != b.IsLeader(); }, 3s));

  auto lease = (*ca)->Get(kLeases, "default", "lock");
  ASSERT_TRUE(lease.ok());
  const std::string holder = (*lease)["spec"]["holderIdentity"];
  EXPECT_EQ(holder, a->IsLeader() ? "a" : "b");
  EXPECT_GE((*lease)["spec"]["leaseTransitions"].get<int>(), 0);

  // The holder stops: it releases, and the other one leads well before expiry.
  LeaderElector& holderElector = holder == "a" ? *a : b;
  LeaderElector& other = holder == "a" ? b : *a;
  holderElector.Stop();
  ASSERT_TRUE(Eventually([&] { return other.IsLeader(); }, 700ms));
}

}  // namespace
}  // namespace easyscale::op
