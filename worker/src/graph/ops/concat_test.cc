#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

TEST(ConcatTest, MiddleAxisMatchesNaive) {
  const Value a = RandomValue({2, 1, 3}, 1), b = RandomValue({2, 2, 3}, 2);
  testing::OpRun run =
      RunOp(MakeNode("Concat", {"a", "b"}, {"y"}, {{"axis", int64_t{-2}}}), {a, b});
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.infos[0].shape, (Shape{2, 3, 3}));
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 3; ++k) {
        const float want =
            j < 1 ? a.floats[(i * 1 + j) * 3 + k] : b.floats[(i * 2 + j - 1) * 3 + k];
        EXPECT_EQ(run.outputs[0].floats[(i * 3 + j) * 3 + k], want);
      }
    }
  }
}

TEST(ConcatTest, Int64ShapeVectors) {
  testing::OpRun run = RunOp(MakeNode("Concat", {"a", "b", "c"}, {"y"}, {{"axis", int64_t{0}}}),
                             {IntValue({1}, {-1}), IntValue({0}, {}), IntValue({2}, {8, 64})});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].dtype, DType::kInt64);
  EXPECT_EQ(run.outputs[0].ints, (std::vector<int64_t>{-1, 8, 64}));
}

TEST(ConcatTest, Gradient) {
  ExpectGradientsMatch(MakeNode("Concat", {"a", "b"}, {"y"}, {{"axis", int64_t{1}}}),
                       {RandomValue({2, 2}, 3), RandomValue({2, 3}, 4)}, {0, 1});
}

TEST(ConcatTest, Errors) {
  testing::OpRun run = RunOp(MakeNode("Concat", {"a", "b"}, {"y"}, {{"axis", int64_t{1}}}),
                             {RandomValue({2, 2}, 3), RandomValue({3, 2}, 4)});
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
  EXPECT_NE(run.status.message().find("input 1"), std::string::npos) << run.status;
  run = RunOp(MakeNode("Concat", {"a"}, {"y"}, {{"axis", int64_t{2}}}), {RandomValue({2, 2}, 3)});
  EXPECT_NE(run.status.message().find("attribute axis 2 is out of range"), std::string::npos)
      << run.status;
  run = RunOp(MakeNode("Concat", {"a"}, {"y"}), {RandomValue({2, 2}, 3)});
  EXPECT_NE(run.status.message().find("Concat_0"), std::string::npos) << run.status;
  run = RunOp(MakeNode("Concat", {"a", "b"}, {"y"}, {{"axis", int64_t{0}}}),
              {RandomValue({2}, 3), IntValue({2}, {1, 2})});
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
