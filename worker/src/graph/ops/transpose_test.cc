#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

TEST(TransposeTest, MatchesNaiveIndexing) {
  const Value x = RandomValue({2, 3, 4}, 1);
  const std::vector<int64_t> perm = {2, 0, 1};
  testing::OpRun run = RunOp(MakeNode("Transpose", {"x"}, {"y"}, {{"perm", perm}}), {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.infos[0].shape, (Shape{4, 2, 3}));
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 3; ++b) {
      for (int c = 0; c < 4; ++c) {
        EXPECT_EQ(run.outputs[0].floats[(c * 2 + a) * 3 + b], x.floats[(a * 3 + b) * 4 + c]);
      }
    }
  }
}

TEST(TransposeTest, DefaultReversesAndInt64) {
  const Value x = IntValue({2, 3}, {1, 2, 3, 4, 5, 6});
  testing::OpRun run = RunOp(MakeNode("Transpose", {"x"}, {"y"}), {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{3, 2}));
  EXPECT_EQ(run.outputs[0].ints, (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
}

TEST(TransposeTest, Gradient) {
  ExpectGradientsMatch(
      MakeNode("Transpose", {"x"}, {"y"}, {{"perm", std::vector<int64_t>{1, 2, 0}}}),
      {RandomValue({2, 3, 2}, 2)}, {0});
}

TEST(TransposeTest, BadPerm) {
  for (const std::vector<int64_t>& perm :
       {std::vector<int64_t>{0, 0}, std::vector<int64_t>{0, 2}, std::vector<int64_t>{0}}) {
    testing::OpRun run =
        RunOp(MakeNode("Transpose", {"x"}, {"y"}, {{"perm", perm}}), {RandomValue({2, 3}, 1)});
    EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
    EXPECT_NE(run.status.message().find("attribute perm"), std::string::npos) << run.status;
  }
}

}  // namespace
}  // namespace easyscale::graph
