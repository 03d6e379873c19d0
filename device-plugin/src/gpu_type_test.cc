#include "gpu_type.h"

#include <gtest/gtest.h>

namespace easyscale::dp {
namespace {

TEST(GpuTypeFromName, KnownTypesFromDriverNames) {
  EXPECT_EQ(GpuTypeFromName("NVIDIA H200"), "h200");
  EXPECT_EQ(GpuTypeFromName("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(GpuTypeFromName("NVIDIA A100-SXM4-80GB"), "a100");
  EXPECT_EQ(GpuTypeFromName("NVIDIA A10"), "a10");
  EXPECT_EQ(GpuTypeFromName("Tesla V100-SXM2-16GB"), "v100");
  EXPECT_EQ(GpuTypeFromName("Tesla T4"), "t4");
}

TEST(GpuTypeFromName, UnknownNamesBecomeLabelValues) {
  EXPECT_EQ(GpuTypeFromName("NVIDIA RTX 6000 Ada Generation"), "nvidia-rtx-6000-ada-generation");
  EXPECT_EQ(GpuTypeFromName(""), "unknown");
  EXPECT_LE(GpuTypeFromName(std::string(200, 'x')).size(), 63u);
}

TEST(IsValidDeviceId, KubeletLimits) {
  EXPECT_TRUE(IsValidDeviceId("GPU-fef8089b-4820-abfc-e83e-94318197576e"));
  EXPECT_FALSE(IsValidDeviceId(""));
  EXPECT_FALSE(IsValidDeviceId(std::string(64, 'a')));
  EXPECT_FALSE(IsValidDeviceId("gpu/0"));
}

}  // namespace
}  // namespace easyscale::dp
