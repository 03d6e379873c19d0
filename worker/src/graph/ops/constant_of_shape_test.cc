#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::IntValue;
using testing::MakeNode;
using testing::RunOp;

TEST(ConstantOfShapeTest, FillsWithValueOrFloatZero) {
  testing::OpRun run =
      RunOp(MakeNode("ConstantOfShape", {"s"}, {"y"}), {IntValue({2}, {2, 3})}, {0});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].dtype, DType::kFloat32);
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 3}));
  EXPECT_EQ(run.outputs[0].floats, std::vector<float>(6, 0.0f));
  EXPECT_FALSE(run.op->HasGradient(0));

  ConstantTensor value;
  value.dtype = DType::kInt64;
  value.shape = {1};
  value.ints = {-7};
  run = RunOp(MakeNode("ConstantOfShape", {"s"}, {"y"}, {{"value", value}}), {IntValue({1}, {4})},
              {0});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].dtype, DType::kInt64);
  EXPECT_EQ(run.outputs[0].ints, std::vector<int64_t>(4, -7));
}

TEST(ConstantOfShapeTest, Errors) {
  testing::OpRun run = RunOp(MakeNode("ConstantOfShape", {"s"}, {"y"}), {IntValue({1}, {4})});
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
  EXPECT_NE(run.status.message().find("ConstantOfShape_0"), std::string::npos) << run.status;
  EXPECT_NE(run.status.message().find("shape input is not known"), std::string::npos);
  run = RunOp(MakeNode("ConstantOfShape", {"s"}, {"y"}), {IntValue({1}, {-1})}, {0});
  EXPECT_NE(run.status.message().find("negative"), std::string::npos) << run.status;
  ConstantTensor two;
  two.shape = {2};
  two.floats = {1.0f, 2.0f};
  run =
      RunOp(MakeNode("ConstantOfShape", {"s"}, {"y"}, {{"value", two}}), {IntValue({1}, {3})}, {0});
  EXPECT_NE(run.status.message().find("attribute value"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
