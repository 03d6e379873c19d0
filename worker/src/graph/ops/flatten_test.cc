#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

TEST(FlattenTest, ShapesForEachAxis) {
  const Value x = RandomValue({2, 3, 4, 5}, 1);
  const std::vector<std::pair<int64_t, Shape>> cases = {
      {0, {1, 120}}, {1, {2, 60}}, {2, {6, 20}}, {4, {120, 1}}, {-1, {24, 5}}, {-4, {1, 120}}};
  for (const auto& [axis, shape] : cases) {
    testing::OpRun run = RunOp(MakeNode("Flatten", {"x"}, {"y"}, {{"axis", axis}}), {x});
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_EQ(run.infos[0].shape, shape) << "axis " << axis;
    EXPECT_EQ(run.outputs[0].floats, x.floats);
  }
  // Default axis 1.
  testing::OpRun run = RunOp(MakeNode("Flatten", {"x"}, {"y"}), {x});
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 60}));
}

TEST(FlattenTest, Int64) {
  const Value x = IntValue({2, 2}, {1, 2, 3, 4});
  testing::OpRun run = RunOp(MakeNode("Flatten", {"x"}, {"y"}, {{"axis", int64_t{0}}}), {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{1, 4}));
  EXPECT_EQ(run.outputs[0].ints, x.ints);
}

TEST(FlattenTest, Gradient) {
  ExpectGradientsMatch(MakeNode("Flatten", {"x"}, {"y"}, {{"axis", int64_t{2}}}),
                       {RandomValue({2, 2, 3}, 2)}, {0});
}

TEST(FlattenTest, AxisOutOfRange) {
  testing::OpRun run =
      RunOp(MakeNode("Flatten", {"x"}, {"y"}, {{"axis", int64_t{3}}}), {RandomValue({2, 2}, 1)});
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
  EXPECT_NE(run.status.message().find("axis"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
