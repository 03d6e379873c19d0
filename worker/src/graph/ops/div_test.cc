#include <gtest/gtest.h>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

float Reference(float a, float b) { return a / b; }

TEST(Div, ForwardBroadcastsLikeNumpy) {
  const Node n = MakeNode("Div", {"a", "b"}, {"y"});
  Value a = RandomValue({2, 3}, 1), b = RandomValue({3}, 2);
  for (float& f : b.floats) f += f < 0 ? -1.0f : 1.0f;  // away from 0
  testing::OpRun run = RunOp(n, {a, b});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 3}));
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_FLOAT_EQ(run.outputs[0].floats[i * 3 + j],
                      Reference(a.floats[i * 3 + j], b.floats[j]));
    }
  }
  // An outer product: [2, 1] with [1, 3].
  Value c = RandomValue({2, 1}, 3), d = RandomValue({1, 3}, 4);
  for (float& f : d.floats) f += f < 0 ? -1.0f : 1.0f;
  run = RunOp(n, {c, d});
  ASSERT_TRUE(run.status.ok()) << run.status;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_FLOAT_EQ(run.outputs[0].floats[i * 3 + j], Reference(c.floats[i], d.floats[j]));
    }
  }
}

TEST(Div, GradientsMatchWithBroadcasting) {
  const Node n = MakeNode("Div", {"a", "b"}, {"y"});
  Value a = RandomValue({2, 3, 5}, 5), b = RandomValue({3, 1}, 6);
  for (float& f : a.floats) f += f < 0 ? -1.0f : 1.0f;  // divisors away from 0 both ways
  for (float& f : b.floats) f += f < 0 ? -1.0f : 1.0f;
  ExpectGradientsMatch(n, {a, b}, {0, 1});
  ExpectGradientsMatch(n, {b, a}, {0, 1});
  Value s = RandomValue({}, 7);
  s.floats[0] = 1.7f;
  ExpectGradientsMatch(n, {a, s}, {0, 1});
}

TEST(Div, Int64ForwardHasNoGradient) {
  const Node n = MakeNode("Div", {"a", "b"}, {"y"});
  testing::OpRun run = RunOp(n, {IntValue({2, 2}, {7, -7, 9, 4}), IntValue({2}, {2, 3})});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].dtype, DType::kInt64);
  EXPECT_EQ(run.outputs[0].ints, (std::vector<int64_t>{3, -2, 4, 1}));
  EXPECT_FALSE(run.op->HasGradient(0));
}
TEST(Div, FactoryErrors) {
  const Node n = MakeNode("Div", {"a", "b"}, {"y"});
  testing::OpRun run = RunOp(n, {RandomValue({2, 3}, 1), RandomValue({4}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  run = RunOp(MakeNode("Div", {"a"}, {"y"}), {RandomValue({2}, 1)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  run = RunOp(n, {IntValue({2}, {1, 2}), RandomValue({2}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find("Div_0"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
