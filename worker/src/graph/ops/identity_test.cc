#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

TEST(IdentityTest, CopiesFloatsAndInts) {
  const Node n = MakeNode("Identity", {"x"}, {"y"});
  const Value x = RandomValue({2, 3}, 1);
  testing::OpRun run = RunOp(n, {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 3}));
  EXPECT_EQ(run.outputs[0].floats, x.floats);
  const Value i = IntValue({3}, {4, -5, 6});
  run = RunOp(n, {i});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].dtype, DType::kInt64);
  EXPECT_EQ(run.outputs[0].ints, i.ints);
}

TEST(IdentityTest, Gradient) {
  ExpectGradientsMatch(MakeNode("Identity", {"x"}, {"y"}), {RandomValue({3, 2}, 2)}, {0});
}

TEST(IdentityTest, MissingInputIsAnError) {
  testing::OpRun run = RunOp(MakeNode("Identity", {""}, {"y"}), {Value()});
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
  EXPECT_NE(run.status.message().find("Identity_0"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
