#include "easyscale/common/node_inventory.h"

#include <gtest/gtest.h>

namespace easyscale {
namespace {

NodeGpu Gpu(const std::string& id, std::optional<std::string> held_by) {
  NodeGpu g;
  g.device.id = id;
  g.device.uuid = "GPU-" + id;
  g.device.type = "h200";
  g.device.memory_mib = 143771;
  g.device.compute_capability = "9.0";
  g.device.numa_node = 1;
  g.held_by = std::move(held_by);
  return g;
}

// The wire format byte for byte: the operator and older plugins read it.
TEST(NodeInventory, WireFormat) {
  NodeGpu trained = Gpu("b", std::nullopt);
  trained.device.healthy = false;
  trained.training_pod = "jobs/w1";
  const std::vector<NodeGpu> gpus = {Gpu("a", "serving/llm-0"), trained};
  const std::string value =
      R"([{"computeCapability":"9.0","healthy":true,"heldBy":"serving/llm-0","id":"a",)"
      R"("memoryMiB":143771,"numaNode":1,"trainingPod":null,"type":"h200","uuid":"GPU-a"},)"
      R"({"computeCapability":"9.0","healthy":false,"heldBy":null,"id":"b",)"
      R"("memoryMiB":143771,"numaNode":1,"trainingPod":"jobs/w1","type":"h200","uuid":"GPU-b"}])";
  EXPECT_EQ(NodeGpusToJson(gpus).dump(), value);
  EXPECT_EQ(NodeInventoryPatch(gpus).dump(),
            R"({"metadata":{"annotations":{"easyscale.io/gpus":)" + nlohmann::json(value).dump() +
                R"(},"labels":{"easyscale.io/gpu-count":"1","easyscale.io/gpu-type":"h200"}}})");
  auto parsed = ParseNodeGpus(value);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, gpus);
}

TEST(NodeInventory, OnlyIdAndTypeAreRequired) {
  auto parsed = ParseNodeGpus(R"([{"id":"0","type":"a100"}])");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 1u);
  const NodeGpu& g = (*parsed)[0];
  EXPECT_EQ(g.device.uuid, "0");  // defaults to the id
  EXPECT_TRUE(g.device.healthy);
  EXPECT_EQ(g.device.numa_node, -1);
  EXPECT_EQ(g.held_by, std::nullopt);
}

TEST(NodeInventory, ErrorsNameTheField) {
  const std::pair<std::string, std::string> cases[] = {
      {"nope", "easyscale.io/gpus: not valid JSON"},
      {"{}", "easyscale.io/gpus: must be a list, got object"},
      {"[1]", "[0]: must be an object, got number"},
      {R"([{"type":"a100"}])", "[0].id: is required"},
      {R"([{"id":"0","type":"a100"},{"id":"1"}])", "[1].type: is required"},
      {R"([{"id":"a/b","type":"a100"}])", "[0].id: must be 1..63 characters"},
      {R"([{"id":"0","type":"a100","healthy":"yes"}])", "[0].healthy: must be a boolean"},
      {R"([{"id":"0","type":"a100","trainingPod":"w1"}])",
       "[0].trainingPod: must be \"namespace/pod\" or null, got \"w1\""},
  };
  for (const auto& [value, want] : cases) {
    auto r = ParseNodeGpus(value);
    ASSERT_FALSE(r.ok()) << value;
    EXPECT_NE(std::string(r.status().message()).find(want), std::string::npos) << r.status();
  }
}

}  // namespace
}  // namespace easyscale
