#include <gtest/gtest.h>

#include <cmath>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

float Reference(float a, float b) {
  return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
}

TEST(Pow, ForwardBroadcastsLikeNumpy) {
  const Node n = MakeNode("Pow", {"a", "b"}, {"y"});
  Value a = RandomValue({2, 3}, 1), b = RandomValue({3}, 2);
  for (float& f : a.floats) f = f + 1.5f;  // positive bases
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
  for (float& f : c.floats) f = f + 1.5f;
  run = RunOp(n, {c, d});
  ASSERT_TRUE(run.status.ok()) << run.status;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_FLOAT_EQ(run.outputs[0].floats[i * 3 + j], Reference(c.floats[i], d.floats[j]));
    }
  }
}

TEST(Pow, GradientsMatchWithBroadcasting) {
  const Node n = MakeNode("Pow", {"a", "b"}, {"y"});
  Value a = RandomValue({2, 3, 5}, 5), b = RandomValue({3, 1}, 6);
  for (float& f : a.floats) f = f + 1.5f;
  ExpectGradientsMatch(n, {a, b}, {0});
  Value s = RandomValue({}, 7);
  s.floats[0] = 2.5f;
  ExpectGradientsMatch(n, {a, s}, {0});
}

TEST(Pow, Int64OperandsAndExactSquares) {
  const Node n = MakeNode("Pow", {"a", "b"}, {"y"});
  Value a = RandomValue({3}, 1);
  testing::OpRun run = RunOp(n, {a, IntValue({3}, {2, 3, -1})});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].dtype, DType::kFloat32);
  EXPECT_EQ(run.outputs[0].floats[0], a.floats[0] * a.floats[0]);
  EXPECT_FLOAT_EQ(run.outputs[0].floats[1], a.floats[1] * a.floats[1] * a.floats[1]);
  EXPECT_FLOAT_EQ(run.outputs[0].floats[2], 1.0f / a.floats[2]);
  EXPECT_TRUE(run.op->HasGradient(0));
  EXPECT_FALSE(run.op->HasGradient(1));
  // int64 bases: exact integer powers, truncated float ones.
  run = RunOp(n, {testing::IntValue({4}, {3, -2, 5, 2}), testing::IntValue({4}, {6, 3, -1, 62})});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].dtype, DType::kInt64);
  EXPECT_EQ(run.outputs[0].ints, (std::vector<int64_t>{729, -8, 0, int64_t{1} << 62}));
  Value e = RandomValue({3}, 3);
  e.floats = {6.0f, 0.5f, -1.0f};
  run = RunOp(n, {testing::IntValue({3}, {3, 10, 1}), e});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].ints, (std::vector<int64_t>{729, 3, 1}));
  EXPECT_FALSE(run.op->HasGradient(0));
  // Negative bases with integer exponents.
  Value neg = RandomValue({2, 3}, 2);
  ExpectGradientsMatch(n, {neg, IntValue({3}, {2, 3, 1})}, {0});
}

TEST(Pow, FactoryErrors) {
  const Node n = MakeNode("Pow", {"a", "b"}, {"y"});
  testing::OpRun run = RunOp(n, {RandomValue({2, 3}, 1), RandomValue({4}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  run = RunOp(MakeNode("Pow", {"a"}, {"y"}), {RandomValue({2}, 1)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  Value flags = IntValue({2}, {1, 0});
  flags.dtype = DType::kBool;
  run = RunOp(n, {flags, RandomValue({2}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find("Pow_0"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
