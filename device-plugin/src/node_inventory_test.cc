#include "easyscale/device_plugin/node_inventory.h"

#include <gtest/gtest.h>

namespace easyscale::dp {
namespace {

GpuDevice Gpu(const std::string& id, const std::string& type) {
  GpuDevice d;
  d.id = id;
  d.uuid = "GPU-" + id;
  d.type = type;
  d.memory_mib = 143771;
  d.compute_capability = "9.0";
  d.numa_node = 0;
  return d;
}

TEST(JoinHolders, MatchesIdOrUuid) {
  DeviceHolders h;
  h.inference["GPU-a"] = "serving/llm-0";  // NVIDIA plugin IDs are UUIDs
  h.training["b"] = "jobs/mnist-w0";       // ours are our IDs
  auto gpus = JoinHolders({Gpu("a", "h200"), Gpu("b", "h200"), Gpu("c", "h200")}, h);
  EXPECT_EQ(gpus[0].held_by, "serving/llm-0");
  EXPECT_EQ(gpus[0].training_pod, std::nullopt);
  EXPECT_EQ(gpus[1].held_by, std::nullopt);
  EXPECT_EQ(gpus[1].training_pod, "jobs/mnist-w0");
  EXPECT_EQ(gpus[2].held_by, std::nullopt);
}

TEST(NodeInventoryPatch, LabelsAndAnnotation) {
  DeviceHolders h;
  h.inference["a"] = "serving/llm-0";
  GpuDevice broken = Gpu("c", "h200");
  broken.healthy = false;
  const auto gpus = JoinHolders({Gpu("a", "h200"), Gpu("b", "h200"), broken}, h);
  const nlohmann::json patch = NodeInventoryPatch(gpus);
  EXPECT_EQ(patch["metadata"]["labels"]["easyscale.io/gpu-type"], "h200");
  EXPECT_EQ(patch["metadata"]["labels"]["easyscale.io/gpu-count"], "2");  // healthy ones
  const auto value = patch["metadata"]["annotations"]["easyscale.io/gpus"].get<std::string>();
  const auto list = nlohmann::json::parse(value);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]["id"], "a");
  EXPECT_EQ(list[0]["heldBy"], "serving/llm-0");
  EXPECT_TRUE(list[1]["heldBy"].is_null());
  EXPECT_TRUE(list[1]["trainingPod"].is_null());
  EXPECT_EQ(list[1]["memoryMiB"], 143771);
  EXPECT_EQ(list[1]["computeCapability"], "9.0");
  EXPECT_EQ(list[1]["numaNode"], 0);
  EXPECT_EQ(list[1]["healthy"], true);

  EXPECT_EQ(NodeInventoryPatch({})["metadata"]["labels"]["easyscale.io/gpu-type"], "none");
  EXPECT_EQ(NodeInventoryPatch(JoinHolders({Gpu("a", "h200"), Gpu("b", "a100")},
                                           {}))["metadata"]["labels"]["easyscale.io/gpu-type"],
            "mixed");
}

TEST(ParseNodeGpus, RoundTrip) {
  DeviceHolders h;
  h.inference["a"] = "serving/llm-0";
  h.training["b"] = "jobs/w1";
  const auto gpus = JoinHolders({Gpu("a", "h200"), Gpu("b", "nvidia-rtx-6000")}, h);
  auto parsed = ParseNodeGpus(NodeGpusToJson(gpus).dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, gpus);
}

TEST(ParseNodeGpus, ErrorsNameTheField) {
  EXPECT_FALSE(ParseNodeGpus("nope").ok());
  EXPECT_FALSE(ParseNodeGpus("{}").ok());
  auto bad = ParseNodeGpus(R"([{"id": "a", "type": "h200", "numaNode": "x"}])");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "[0].numaNode: must be an integer, got string");
  bad = ParseNodeGpus(R"([{"id": "a", "type": "h200", "heldBy": "no-slash"}])");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[0].heldBy"), std::string::npos);
  // Unknown fields are ignored so the format can grow.
  EXPECT_TRUE(ParseNodeGpus(R"([{"id": "a", "type": "h200", "future": 1}])").ok());
}

}  // namespace
}  // namespace easyscale::dp
