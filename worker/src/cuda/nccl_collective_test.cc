// UseDeviceCollective: the host collective stays for a CPU rank; a rank on a
// GPU of its own sums through NCCL, exactly (runs with a GPU, skips without).
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "device_buffer.h"
#include "easyscale/worker/collective.h"

namespace easyscale {
namespace {

TEST(DeviceCollective, CpuRankKeepsTheHostCollective) {
  auto host = MakeSingleProcessCollective();
  Collective* raw = host.get();
  auto chosen = UseDeviceCollective(std::move(host), /*on_gpu=*/false, 0);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->get(), raw);
}

TEST(DeviceCollective, GpuRankSumsThroughNccl) {
  std::string why;
  if (cuda::UsableDeviceCount(&why) == 0) GTEST_SKIP() << "needs a CUDA GPU: " << why;
  auto host = MakeSingleProcessCollective();
  Collective* raw = host.get();
  auto chosen = UseDeviceCollective(std::move(host), /*on_gpu=*/true, 0);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  ASSERT_NE(chosen->get(), raw) << "one rank on its own GPU should get NCCL";
  std::vector<int64_t> data = {0,
                               1,
                               -1,
                               std::numeric_limits<int64_t>::max() / 3,
                               std::numeric_limits<int64_t>::min() / 3,
                               123456789012345};
  const std::vector<int64_t> want = data;  // one rank: the sum is itself, bit for bit
  ASSERT_TRUE((*chosen)->AllreduceSum(data).ok());
  EXPECT_EQ(data, want);
  EXPECT_TRUE((*chosen)->Barrier().ok());
}

}  // namespace
}  // namespace easyscale
