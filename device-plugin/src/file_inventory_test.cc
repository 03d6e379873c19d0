#include "easyscale/device_plugin/file_inventory.h"

#include <gtest/gtest.h>

namespace easyscale::dp {
namespace {

std::string ErrorOf(const std::string& text) {
  auto r = ParseInventory(text, "inv.json");
  return r.ok() ? "" : std::string(r.status().message());
}

TEST(ParseInventory, ReadsEveryField) {
  auto r = ParseInventory(R"({"devices": [
      {"id": "gpu0", "type": "h200", "index": 0, "name": "NVIDIA H200", "uuid": "GPU-1",
       "memoryMiB": 143771, "computeCapability": "9.0", "numaNode": 1, "healthy": false,
       "devicePaths": ["/dev/nvidia0"]},
      {"id": "gpu1", "type": "a100", "index": 1}]})",
                          "inv.json");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  const GpuDevice& a = (*r)[0];
  EXPECT_EQ(a.id, "gpu0");
  EXPECT_EQ(a.type, "h200");
  EXPECT_EQ(a.uuid, "GPU-1");
  EXPECT_EQ(a.memory_mib, 143771);
  EXPECT_EQ(a.compute_capability, "9.0");
  EXPECT_EQ(a.numa_node, 1);
  EXPECT_FALSE(a.healthy);
  EXPECT_EQ(a.device_paths, std::vector<std::string>{"/dev/nvidia0"});
  const GpuDevice& b = (*r)[1];
  EXPECT_EQ(b.uuid, "gpu1");  // defaults to the id
  EXPECT_EQ(b.numa_node, -1);
  EXPECT_TRUE(b.healthy);
}

TEST(ParseInventory, RoundTripsThroughInventoryToJson) {
  auto r = ParseInventory(R"({"devices": [{"id": "g", "type": "l4", "index": 3,
      "memoryMiB": 22000, "computeCapability": "8.9", "numaNode": 0}]})",
                          "x");
  ASSERT_TRUE(r.ok());
  auto again = ParseInventory(InventoryToJson(*r).dump(), "y");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *r);
}

TEST(ParseInventory, ErrorsNameTheField) {
  EXPECT_EQ(ErrorOf("{"), "inv.json: not valid JSON");
  EXPECT_EQ(ErrorOf("[]"), "inv.json: must be an object");
  EXPECT_EQ(ErrorOf("{}"), "inv.json: devices: is required");
  EXPECT_EQ(ErrorOf(R"({"devices": 3})"), "inv.json: devices: must be a list, got number");
  EXPECT_EQ(ErrorOf(R"({"devices": [{"type": "h200", "index": 0}]})"),
            "inv.json: devices[0].id: is required");
  EXPECT_NE(ErrorOf(R"({"devices": [{"id": "a/b", "type": "h200", "index": 0}]})")
                .find("devices[0].id: must be 1..63"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"devices": [{"id": "a", "type": "cpu", "index": 0}]})")
                .find("devices[0].type: must be one of"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"devices": [{"id": "a", "type": "h200"}]})"),
            "inv.json: devices[0].index: is required");
  EXPECT_EQ(ErrorOf(R"({"devices": [{"id": "a", "type": "h200", "index": -1}]})"),
            "inv.json: devices[0].index: must be >= 0, got -1");
  EXPECT_EQ(ErrorOf(R"({"devices": [{"id": "a", "type": "h200", "index": 0, "memoryMiB": "x"}]})"),
            "inv.json: devices[0].memoryMiB: must be an integer, got string");
  EXPECT_NE(ErrorOf(R"({"devices": [{"id": "a", "type": "h200", "index": 0,
                        "computeCapability": "nine"}]})")
                .find("devices[0].computeCapability"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(R"({"devices": [{"id": "a", "type": "h200", "index": 0, "numaNode": -2}]})"),
            "inv.json: devices[0].numaNode: must be >= -1, got -2");
  EXPECT_EQ(ErrorOf(R"({"devices": [{"id": "a", "type": "h200", "index": 0, "healthy": 1}]})"),
            "inv.json: devices[0].healthy: must be a boolean, got number");
  EXPECT_EQ(ErrorOf(R"({"devices": [{"id": "a", "type": "h200", "index": 0,
                        "devicePaths": ["dev/x"]}]})"),
            "inv.json: devices[0].devicePaths[0]: must be an absolute path");
  EXPECT_EQ(ErrorOf(R"({"devices": [{"id": "a", "type": "h200", "index": 0},
                                    {"id": "a", "type": "h200", "index": 1}]})"),
            "inv.json: devices[1].id: duplicate device ID \"a\"");
  EXPECT_EQ(ErrorOf(R"({"devices": [{"id": "a", "type": "h200", "index": 0},
                                    {"id": "b", "type": "h200", "index": 0}]})"),
            "inv.json: devices[1].index: duplicate index 0");
}

TEST(LoadInventoryFile, MissingFileIsAnError) {
  EXPECT_FALSE(LoadInventoryFile("/nonexistent/inventory.json").ok());
}

}  // namespace
}  // namespace easyscale::dp
