#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

TEST(SplitTest, SizesFromInput) {
  const Value x = RandomValue({2, 5}, 1);
  testing::OpRun run = RunOp(MakeNode("Split", {"x", "split"}, {"a", "b"}, {{"axis", int64_t{1}}}),
                             {x, IntValue({2}, {2, 3})}, {1});
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.infos[0].shape, (Shape{2, 2}));
  ASSERT_EQ(run.infos[1].shape, (Shape{2, 3}));
  const std::vector<float>& f = x.floats;
  EXPECT_EQ(run.outputs[0].floats, (std::vector<float>{f[0], f[1], f[5], f[6]}));
  EXPECT_EQ(run.outputs[1].floats, (std::vector<float>{f[2], f[3], f[4], f[7], f[8], f[9]}));
}

TEST(SplitTest, EqualPartsNumOutputsAndOldAttribute) {
  const Value x = IntValue({6}, {0, 1, 2, 3, 4, 5});
  testing::OpRun run = RunOp(MakeNode("Split", {"x"}, {"a", "b", "c"}), {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[2].ints, (std::vector<int64_t>{4, 5}));
  // num_outputs: parts of ceil(7 / 4) = 2, the last one smaller.
  run = RunOp(MakeNode("Split", {"x"}, {"a", "b", "c", "d"}, {{"num_outputs", int64_t{4}}}),
              {IntValue({7}, {0, 1, 2, 3, 4, 5, 6})}, {}, true, 18);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2}));
  EXPECT_EQ(run.outputs[3].ints, (std::vector<int64_t>{6}));
  run = RunOp(MakeNode("Split", {"x"}, {"a", "b"}, {{"split", std::vector<int64_t>{1, 5}}}), {x},
              {}, true, 11);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[1].ints, (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

TEST(SplitTest, GradientWithAnOutputUnused) {
  ExpectGradientsMatch(MakeNode("Split", {"x", "split"}, {"a", "", "c"}, {{"axis", int64_t{0}}}),
                       {RandomValue({4, 2}, 2), IntValue({3}, {1, 2, 1})}, {0}, {1});
}

TEST(SplitTest, Errors) {
  const Value x = RandomValue({2, 5}, 1);
  auto message = [&](const Node& n, std::vector<Value> in, std::vector<size_t> constants) {
    testing::OpRun run = RunOp(n, in, constants);
    EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
    EXPECT_NE(run.status.message().find("Split_0"), std::string::npos) << run.status;
    return std::string(run.status.message());
  };
  const Node two = MakeNode("Split", {"x", "split"}, {"a", "b"}, {{"axis", int64_t{1}}});
  EXPECT_NE(message(two, {x, IntValue({2}, {2, 2})}, {1}).find("do not split"), std::string::npos);
  EXPECT_NE(message(two, {x, IntValue({3}, {2, 2, 1})}, {1}).find("do not split"),
            std::string::npos);
  EXPECT_NE(message(two, {x, IntValue({2}, {2, 3})}, {}).find("split input is not known"),
            std::string::npos);
  EXPECT_NE(message(MakeNode("Split", {"x"}, {"a", "b"}, {{"axis", int64_t{1}}}), {x}, {})
                .find("equally"),
            std::string::npos);
  EXPECT_NE(message(MakeNode("Split", {"x"}, {"a", "b"}, {{"axis", int64_t{2}}}), {x}, {})
                .find("out of range"),
            std::string::npos);
}

}  // namespace
}  // namespace easyscale::graph
