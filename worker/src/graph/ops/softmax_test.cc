#include <gtest/gtest.h>

#include <cmath>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

// Softmax of x [a, b, c] along axis 1, in double.
std::vector<double> Reference(const Value& x, bool log) {
  const int64_t a = x.shape[0], b = x.shape[1], c = x.shape[2];
  std::vector<double> y(x.floats.size());
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t k = 0; k < c; ++k) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < b; ++j) m = std::max<double>(m, x.floats[(i * b + j) * c + k]);
      for (int64_t j = 0; j < b; ++j) s += std::exp(x.floats[(i * b + j) * c + k] - m);
      for (int64_t j = 0; j < b; ++j) {
        const double z = x.floats[(i * b + j) * c + k] - m;
        y[(i * b + j) * c + k] = log ? z - std::log(s) : std::exp(z) / s;
      }
    }
  }
  return y;
}

TEST(Softmax, ForwardAlongAMiddleAxis) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    Value x = RandomValue({2, 5, 3}, 1);
    for (float& f : x.floats) f *= 20.0f;
    testing::OpRun run = RunOp(MakeNode(op, {"x"}, {"y"}, {{"axis", int64_t{-2}}}), {x});
    ASSERT_TRUE(run.status.ok()) << run.status;
    const std::vector<double> want = Reference(x, op[0] == 'L');
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(run.outputs[0].floats[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << op << i;
    }
  }
}

TEST(Softmax, LargeInputsAndTheOldTwoDimensionalSemantics) {
  Value x = RandomValue({1, 2, 3}, 2);
  x.floats[0] = 10000.0f;
  testing::OpRun run = RunOp(MakeNode("Softmax", {"x"}, {"y"}), {x});
  EXPECT_EQ(run.outputs[0].floats[0], 1.0f);
  // Opset 11, axis 1: each of the 1 rows holds all 6 elements.
  run = RunOp(MakeNode("Softmax", {"x"}, {"y"}), {x}, {}, true, 11);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].floats[0], 1.0f);
  EXPECT_EQ(run.outputs[0].floats[3], 0.0f);
}

TEST(Softmax, GradientsMatch) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    testing::ExpectGradientsMatch(MakeNode(op, {"x"}, {"y"}), {RandomValue({3, 5}, 3)}, {0});
    testing::ExpectGradientsMatch(MakeNode(op, {"x"}, {"y"}, {{"axis", int64_t{1}}}),
                                  {RandomValue({2, 3, 3}, 4)}, {0});
  }
}

TEST(Softmax, FactoryErrors) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    testing::OpRun run =
        RunOp(MakeNode(op, {"x"}, {"y"}, {{"axis", int64_t{3}}}), {RandomValue({2, 3}, 1)});
    EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
    EXPECT_NE(run.status.message().find("axis"), std::string::npos) << run.status;
    run = RunOp(MakeNode(op, {"x"}, {"y"}, {{"axis", 1.0f}}), {RandomValue({2, 3}, 1)});
    EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
    run = RunOp(MakeNode(op, {"x"}, {"y"}), {testing::IntValue({2}, {1, 2})});
    EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  }
  // Mul+Softmax (graph/fusion.h) needs its scale.
  testing::OpRun run = RunOp(MakeNode("Mul+Softmax", {"x"}, {"y"}), {RandomValue({2, 3}, 1)});
  EXPECT_NE(run.status.message().find("attribute scale is missing"), std::string::npos)
      << run.status;
  run = RunOp(MakeNode("Mul+Softmax", {"x"}, {"y"}, {{"scale", int64_t{2}}}),
              {RandomValue({2, 3}, 1)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_TRUE(
      RunOp(MakeNode("Mul+Softmax", {"x"}, {"y"}, {{"scale", 0.125f}}), {RandomValue({2, 3}, 1)})
          .status.ok());
}

}  // namespace
}  // namespace easyscale::graph
