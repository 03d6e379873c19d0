// The binary elementwise ops, one table row each: the reference formula, where
// its operands are drawn, and its int64 results; Pow's mixed-dtype cases are a
// test of their own below.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

void Keep(Value*) {}
// Divisors away from 0.
void AwayFromZero(Value* v) {
  for (float& f : v->floats) f += f < 0 ? -1.0f : 1.0f;
}
// Positive bases.
void Positive(Value* v) {
  for (float& f : v->floats) f = f + 1.5f;
}

struct BinaryCase {
  std::string op;
  float (*reference)(float a, float b);
  // Moves random operands A and B where the op is defined: forward's, and
  // the gradient check's (which also runs with A and B swapped).
  void (*forward_a)(Value*), (*forward_b)(Value*);
  void (*gradient_a)(Value*), (*gradient_b)(Value*);
  std::optional<float> scalar_b;  // the gradient check's scalar B, else random
  bool b_has_gradient;
  // {7, -7, 9, 4} op {2, 3} broadcast; nullopt where int64 operands have a
  // test of their own.
  std::optional<std::vector<int64_t>> int64_result;
  // int64 with float32 is an error, except where the op takes it (Pow): bool.
  bool mixed_dtypes;
};

const BinaryCase kCases[] = {
    {"Add", [](float a, float b) { return a + b; }, Keep, Keep, Keep, Keep, std::nullopt, true,
     std::vector<int64_t>{9, -4, 11, 7}, false},
    {"Sub", [](float a, float b) { return a - b; }, Keep, Keep, Keep, Keep, std::nullopt, true,
     std::vector<int64_t>{5, -10, 7, 1}, false},
    {"Mul", [](float a, float b) { return a * b; }, Keep, Keep, Keep, Keep, std::nullopt, true,
     std::vector<int64_t>{14, -21, 18, 12}, false},
    // A is a divisor too once the gradient check swaps A and B.
    {"Div", [](float a, float b) { return a / b; }, Keep, AwayFromZero, AwayFromZero, AwayFromZero,
     1.7f, true, std::vector<int64_t>{3, -2, 4, 1}, false},
    {"Pow",
     [](float a, float b) {
       return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
     },
     Positive, Keep, Positive, Keep, 2.5f, false, std::nullopt, true},
};

class BinaryElementwise : public ::testing::TestWithParam<BinaryCase> {
 protected:
  Node MakeOpNode(std::vector<std::string> inputs = {"a", "b"}) const {
    return MakeNode(GetParam().op, std::move(inputs), {"y"});
  }
};

TEST_P(BinaryElementwise, ForwardBroadcastsLikeNumpy) {
  const BinaryCase& c = GetParam();
  const Node n = MakeOpNode();
  Value a = RandomValue({2, 3}, 1), b = RandomValue({3}, 2);
  c.forward_a(&a);
  c.forward_b(&b);
  testing::OpRun run = RunOp(n, {a, b});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 3}));
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_FLOAT_EQ(run.outputs[0].floats[i * 3 + j],
                      c.reference(a.floats[i * 3 + j], b.floats[j]));
    }
  }
  // An outer product: [2, 1] with [1, 3].
  Value col = RandomValue({2, 1}, 3), row = RandomValue({1, 3}, 4);
  c.forward_a(&col);
  c.forward_b(&row);
  run = RunOp(n, {col, row});
  ASSERT_TRUE(run.status.ok()) << run.status;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_FLOAT_EQ(run.outputs[0].floats[i * 3 + j], c.reference(col.floats[i], row.floats[j]));
    }
  }
}

TEST_P(BinaryElementwise, GradientsMatchWithBroadcasting) {
  const BinaryCase& c = GetParam();
  const Node n = MakeOpNode();
  Value a = RandomValue({2, 3, 5}, 5), b = RandomValue({3, 1}, 6);
  c.gradient_a(&a);
  c.gradient_b(&b);
  const std::vector<size_t> wrt =
      c.b_has_gradient ? std::vector<size_t>{0, 1} : std::vector<size_t>{0};
  ExpectGradientsMatch(n, {a, b}, wrt);
  if (c.b_has_gradient) ExpectGradientsMatch(n, {b, a}, wrt);
  Value s = RandomValue({}, 7);
  if (c.scalar_b) s.floats[0] = *c.scalar_b;
  ExpectGradientsMatch(n, {a, s}, wrt);
}

TEST_P(BinaryElementwise, Int64ForwardHasNoGradient) {
  const BinaryCase& c = GetParam();
  if (!c.int64_result) GTEST_SKIP() << c.op << " has its own int64 test";
  testing::OpRun run =
      RunOp(MakeOpNode(), {IntValue({2, 2}, {7, -7, 9, 4}), IntValue({2}, {2, 3})});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].dtype, DType::kInt64);
  EXPECT_EQ(run.outputs[0].ints, *c.int64_result);
  EXPECT_FALSE(run.op->HasGradient(0));
}

TEST_P(BinaryElementwise, FactoryErrors) {
  const BinaryCase& c = GetParam();
  const Node n = MakeOpNode();
  testing::OpRun run = RunOp(n, {RandomValue({2, 3}, 1), RandomValue({4}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  run = RunOp(MakeOpNode({"a"}), {RandomValue({2}, 1)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  Value bad = IntValue({2}, {1, 2});
  if (c.mixed_dtypes) bad.dtype = DType::kBool;
  run = RunOp(n, {bad, RandomValue({2}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find(c.op + "_0"), std::string::npos) << run.status;
}

INSTANTIATE_TEST_SUITE_P(Ops, BinaryElementwise, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<BinaryCase>& info) {
                           return info.param.op;
                         });

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

}  // namespace
}  // namespace easyscale::graph
