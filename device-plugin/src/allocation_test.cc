#include "allocation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace easyscale::dp {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

GpuDevice Gpu(const std::string& id, int index, const std::string& type, int numa) {
  GpuDevice d;
  d.id = id;
  d.uuid = "GPU-" + id;
  d.index = index;
  d.type = type;
  d.numa_node = numa;
  d.device_paths = {"/dev/nvidia" + std::to_string(index)};
  return d;
}

// Two NUMA nodes of H200 (3 + 2 GPUs) and one A100 on node 0.
std::vector<GpuDevice> Inventory() {
  return {Gpu("a", 0, "h200", 0), Gpu("b", 1, "h200", 0), Gpu("c", 2, "h200", 0),
          Gpu("d", 3, "h200", 1), Gpu("e", 4, "h200", 1), Gpu("f", 5, "a100", 0)};
}

const std::vector<std::string> kAll = {"a", "b", "c", "d", "e", "f"};

TEST(PreferredAllocation, PicksTheSmallestGroupThatFits) {
  // Two GPUs fit on NUMA node 1 exactly; node 0 stays whole for a 3-GPU job.
  auto ids = PreferredAllocation(Inventory(), kAll, {}, 2);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, UnorderedElementsAre("d", "e"));
}

TEST(PreferredAllocation, OneTypeOneNumaNodeWhenItFits) {
  auto ids = PreferredAllocation(Inventory(), kAll, {}, 3);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre("a", "b", "c"));
}

TEST(PreferredAllocation, OneTypeAcrossNumaNodesBeforeMixingTypes) {
  auto ids = PreferredAllocation(Inventory(), kAll, {}, 5);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, UnorderedElementsAre("a", "b", "c", "d", "e"));
}

TEST(PreferredAllocation, MustIncludeDecidesTheGroup) {
  auto ids = PreferredAllocation(Inventory(), kAll, {"d"}, 2);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre("d", "e"));
  ids = PreferredAllocation(Inventory(), kAll, {"f"}, 2);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*ids)[0], "f");
  EXPECT_EQ(ids->size(), 2u);
}

TEST(PreferredAllocation, OnlyFromAvailable) {
  auto ids = PreferredAllocation(Inventory(), {"c", "e", "f"}, {}, 2);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, UnorderedElementsAre("c", "e"));  // both h200, across NUMA nodes
}

TEST(PreferredAllocation, BadRequestsAreErrors) {
  EXPECT_TRUE(absl::IsInvalidArgument(PreferredAllocation(Inventory(), kAll, {}, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(PreferredAllocation(Inventory(), {"a"}, {}, 2).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(PreferredAllocation(Inventory(), {"zz"}, {}, 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(PreferredAllocation(Inventory(), {"a"}, {"b"}, 1).status()));
}

TEST(BuildAllocation, EnvsDevicesAndAnnotations) {
  const auto inv = Inventory();
  const ContainerAllocation a = BuildAllocation({inv[1], inv[3]}, {"/dev/nvidiactl"});
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-b,GPU-d");
  EXPECT_EQ(a.envs.at("CUDA_VISIBLE_DEVICES"), "GPU-b,GPU-d");
  EXPECT_EQ(a.envs.at("EASYSCALE_GPU_TYPE"), "h200");
  EXPECT_EQ(a.annotations.at("easyscale.io/gpu-ids"), "b,d");
  ASSERT_EQ(a.devices.size(), 3u);
  EXPECT_EQ(a.devices[0].path, "/dev/nvidia1");
  EXPECT_EQ(a.devices[1].path, "/dev/nvidia3");
  EXPECT_EQ(a.devices[2].path, "/dev/nvidiactl");
  EXPECT_EQ(a.devices[2].permissions, "rw");
}

}  // namespace
}  // namespace easyscale::dp
