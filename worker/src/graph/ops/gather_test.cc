#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

Node GatherNode(int64_t axis) { return MakeNode("Gather", {"x", "i"}, {"y"}, {{"axis", axis}}); }

TEST(GatherTest, AxisOneWithNegativeIndicesMatchesNaive) {
  const Value x = RandomValue({2, 4, 3}, 1);
  const Value idx = IntValue({2, 2}, {3, -4, 1, -1});
  testing::OpRun run = RunOp(GatherNode(1), {x, idx});
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.infos[0].shape, (Shape{2, 2, 2, 3}));
  const int wrapped[4] = {3, 0, 1, 3};
  for (int o = 0; o < 2; ++o) {
    for (int p = 0; p < 4; ++p) {
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(run.outputs[0].floats[(o * 4 + p) * 3 + i],
                  x.floats[(o * 4 + wrapped[p]) * 3 + i]);
      }
    }
  }
}

TEST(GatherTest, Int64DataAndScalarIndex) {
  // The loader's shape computations: Gather(Shape(x), 0) is a scalar.
  testing::OpRun run = RunOp(GatherNode(0), {IntValue({3}, {8, 128, 768}), IntValue({}, {-1})});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, Shape{});
  EXPECT_EQ(run.outputs[0].ints, (std::vector<int64_t>{768}));
}

TEST(GatherTest, Gradient) {
  ExpectGradientsMatch(GatherNode(0), {RandomValue({4, 3}, 2), IntValue({3}, {2, 0, 2})}, {0});
}

TEST(GatherTest, ScatterAddIsInIndexPositionOrder) {
  // Position order: (1 + 1e8) - 1e8 = 0 in float; descending order gives 1.
  const Node n = GatherNode(0);
  const Value x = RandomValue({2}, 1);
  const Value idx = IntValue({3}, {1, 1, 1});
  testing::OpRun run = RunOp(n, {x, idx});
  ASSERT_TRUE(run.status.ok()) << run.status;
  Value dy;
  dy.Reset(DType::kFloat32, {3});
  dy.floats = {1.0f, 1e8f, -1e8f};
  Value dx;
  dx.Reset(DType::kFloat32, {2});
  RunContext ctx;
  run.op->Backward(ctx, {&x, &idx}, {&run.outputs[0]}, {&dy}, {&dx, nullptr});
  EXPECT_EQ(dx.floats, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_FALSE(run.op->HasGradient(1));
}

TEST(GatherTest, Errors) {
  const Value x = RandomValue({2, 3}, 1);
  testing::OpRun run = RunOp(GatherNode(2), {x, IntValue({1}, {0})});
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
  EXPECT_NE(run.status.message().find("attribute axis 2 is out of range"), std::string::npos)
      << run.status;
  run = RunOp(GatherNode(0), {x, RandomValue({1}, 2)});
  EXPECT_NE(run.status.message().find("indices input is float32"), std::string::npos) << run.status;
  run = RunOp(GatherNode(1), {x, IntValue({1}, {3})}, {1});
  EXPECT_NE(run.status.message().find("node Gather_0"), std::string::npos) << run.status;
  EXPECT_NE(run.status.message().find("indices input has 3, out of range"), std::string::npos)
      << run.status;
}

}  // namespace
}  // namespace easyscale::graph
