#include <gtest/gtest.h>

#include <thread>

#include "easyscale/device_plugin/resource_manager.h"

namespace easyscale::dp {
namespace {

std::vector<GpuDevice> TwoGpus() {
  GpuDevice a;
  a.id = "a";
  GpuDevice b;
  b.id = "b";
  b.index = 1;
  return {a, b};
}

TEST(DeviceTable, LookupKeepsOrderAndNamesUnknownIds) {
  DeviceTable t(TwoGpus());
  auto found = t.Lookup({"b", "a"});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)[0].id, "b");
  auto missing = t.Lookup({"a", "nope"});
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
}

TEST(DeviceTable, HealthGoesDownAndComesBack) {
  DeviceTable t(TwoGpus());
  const uint64_t v0 = t.Version();
  EXPECT_TRUE(t.SetHealth("a", false, "XID 79"));
  EXPECT_FALSE(t.SetHealth("a", false, "XID 79"));  // no change, no new version
  EXPECT_EQ(t.Version(), v0 + 1);
  EXPECT_FALSE(t.Devices()[0].healthy);
  EXPECT_EQ(t.Devices()[0].health_reason, "XID 79");
  EXPECT_TRUE(t.SetHealth("a", true, ""));
  EXPECT_TRUE(t.Devices()[0].healthy);
  EXPECT_EQ(t.Devices()[0].health_reason, "");
  EXPECT_FALSE(t.SetHealth("unknown", false, "x"));
}

TEST(DeviceTable, AGpuInferenceHoldsIsAdvertisedUnhealthyUntilReleased) {
  DeviceTable t(TwoGpus());
  ASSERT_TRUE(t.SetHealth("b", false, "XID 79"));
  const uint64_t v0 = t.Version();
  EXPECT_TRUE(t.SetInferenceHolders({{"a", "serving/llm-0"}, {"b", "serving/llm-1"}}));
  EXPECT_FALSE(t.SetInferenceHolders({{"a", "serving/llm-0"}, {"b", "serving/llm-1"}}));
  EXPECT_EQ(t.Version(), v0 + 1);  // ListAndWatch streams wake once
  const std::vector<GpuDevice> advertised = t.Advertised();
  EXPECT_FALSE(advertised[0].healthy);
  EXPECT_EQ(advertised[0].health_reason, "held by inference pod serving/llm-0");
  EXPECT_EQ(advertised[1].health_reason, "XID 79");  // its own fault says more
  EXPECT_TRUE(t.Devices()[0].healthy);               // the GPU itself is fine
  EXPECT_TRUE(t.SetInferenceHolders({}));
  EXPECT_TRUE(t.Advertised()[0].healthy);
}

TEST(DeviceTable, WaitForChangeWakesOnHealthChange) {
  DeviceTable t(TwoGpus());
  const uint64_t v = t.Version();
  EXPECT_EQ(t.WaitForChange(v, std::chrono::milliseconds(20)), v);  // times out
  std::thread changer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    t.SetHealth("b", false, "test");
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(t.WaitForChange(v, std::chrono::seconds(10)), v + 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  changer.join();
}

}  // namespace
}  // namespace easyscale::dp
