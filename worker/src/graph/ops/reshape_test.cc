#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

Node ReshapeNode(int64_t allowzero = 0) {
  return MakeNode("Reshape", {"x", "shape"}, {"y"}, {{"allowzero", allowzero}});
}

Shape ReshapedShape(const Shape& in, std::vector<int64_t> shape, const Node& n = ReshapeNode()) {
  const int64_t k = static_cast<int64_t>(shape.size());
  testing::OpRun run = RunOp(n, {RandomValue(in, 1), IntValue({k}, std::move(shape))}, {1});
  EXPECT_TRUE(run.status.ok()) << run.status;
  return run.infos.empty() ? Shape{} : run.infos[0].shape;
}

TEST(ReshapeTest, ZeroAndMinusOne) {
  EXPECT_EQ(ReshapedShape({2, 3, 4}, {4, 2, 3}), (Shape{4, 2, 3}));
  EXPECT_EQ(ReshapedShape({2, 3, 4}, {0, -1}), (Shape{2, 12}));
  EXPECT_EQ(ReshapedShape({2, 3, 4}, {-1}), (Shape{24}));
  EXPECT_EQ(ReshapedShape({2, 3, 4}, {2, 0, 4, 1}), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(ReshapedShape({2, 3, 4}, {-1, 0, 2}), (Shape{4, 3, 2}));
  // allowzero: 0 is an empty dimension.
  const Node allowzero = ReshapeNode(1);
  EXPECT_EQ(ReshapedShape({0, 3, 4}, {3, 4, 0}, allowzero), (Shape{3, 4, 0}));
}

TEST(ReshapeTest, KeepsElementOrderForFloatAndInt) {
  const Value x = RandomValue({2, 6}, 3);
  testing::OpRun run = RunOp(ReshapeNode(), {x, IntValue({2}, {3, 4})}, {1});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].floats, x.floats);
  const Value i = IntValue({2, 2}, {7, 8, 9, 10});
  run = RunOp(ReshapeNode(), {i, IntValue({1}, {-1})}, {1});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].dtype, DType::kInt64);
  EXPECT_EQ(run.outputs[0].ints, i.ints);
}

TEST(ReshapeTest, Gradient) {
  ExpectGradientsMatch(ReshapeNode(), {RandomValue({2, 3}, 4), IntValue({2}, {3, 2})}, {0}, {1});
}

TEST(ReshapeTest, Errors) {
  const Value x = RandomValue({2, 3}, 1);
  auto error = [&](std::vector<int64_t> shape, std::vector<size_t> constants = {1},
                   const Node& n = ReshapeNode()) {
    const int64_t k = static_cast<int64_t>(shape.size());
    testing::OpRun run = RunOp(n, {x, IntValue({k}, std::move(shape))}, constants);
    EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
    EXPECT_NE(run.status.message().find("Reshape_0"), std::string::npos) << run.status;
    return std::string(run.status.message());
  };
  EXPECT_NE(error({4, 2}).find("does not fit"), std::string::npos);
  EXPECT_NE(error({-1, 4}).find("does not fit"), std::string::npos);
  EXPECT_NE(error({-1, -1}).find("more than one -1"), std::string::npos);
  EXPECT_NE(error({-2, 3}).find("negative"), std::string::npos);
  EXPECT_NE(error({1, 2, 0}).find("lacks"), std::string::npos);
  EXPECT_NE(error({3, 2}, {}).find("shape input is not known at load time"), std::string::npos);
  const Node allowzero = ReshapeNode(1);
  EXPECT_NE(error({0, -1}, {1}, allowzero).find("does not fit"), std::string::npos);
}

}  // namespace
}  // namespace easyscale::graph
