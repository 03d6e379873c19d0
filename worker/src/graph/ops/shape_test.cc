#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

std::vector<int64_t> ShapeOf(const Value& x, std::map<std::string, Attribute> attributes = {}) {
  testing::OpRun run = RunOp(MakeNode("Shape", {"x"}, {"y"}, std::move(attributes)), {x});
  EXPECT_TRUE(run.status.ok()) << run.status;
  if (!run.status.ok()) return {};
  EXPECT_EQ(run.infos[0].dtype, DType::kInt64);
  EXPECT_EQ(run.infos[0].shape, (Shape{static_cast<int64_t>(run.outputs[0].ints.size())}));
  return run.outputs[0].ints;
}

TEST(ShapeTest, WholeAndPartOfTheShape) {
  const Value x = RandomValue({2, 3, 4}, 1);
  EXPECT_EQ(ShapeOf(x), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(ShapeOf(IntValue({5}, {1, 2, 3, 4, 5})), (std::vector<int64_t>{5}));
  EXPECT_EQ(ShapeOf(x, {{"start", int64_t{1}}}), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ShapeOf(x, {{"end", int64_t{-1}}}), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ShapeOf(x, {{"start", int64_t{-10}}, {"end", int64_t{10}}}),
            (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(ShapeOf(x, {{"start", int64_t{2}}, {"end", int64_t{1}}}), (std::vector<int64_t>{}));
  EXPECT_EQ(ShapeOf(RandomValue({}, 1)), (std::vector<int64_t>{}));
}

TEST(ShapeTest, HasNoGradient) {
  testing::OpRun run = RunOp(MakeNode("Shape", {"x"}, {"y"}), {RandomValue({2}, 1)});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_FALSE(run.op->HasGradient(0));
}

TEST(ShapeTest, BadAttribute) {
  testing::OpRun run =
      RunOp(MakeNode("Shape", {"x"}, {"y"}, {{"start", std::string("1")}}), {RandomValue({2}, 1)});
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
  EXPECT_NE(run.status.message().find("Shape_0"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
