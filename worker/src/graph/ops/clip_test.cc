#include <gtest/gtest.h>

#include <cmath>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;
using testing::ScalarValue;

TEST(Clip, BoundsFromConstantsRuntimeInputsOrAttributes) {
  const Value x = RandomValue({4, 5}, 1);
  auto check = [&](const testing::OpRun& run, float lo, float hi) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    for (size_t i = 0; i < x.floats.size(); ++i) {
      EXPECT_EQ(run.outputs[0].floats[i], std::fmin(std::fmax(x.floats[i], lo), hi));
    }
  };
  const Node both = MakeNode("Clip", {"x", "lo", "hi"}, {"y"});
  check(RunOp(both, {x, ScalarValue(-0.3f), ScalarValue(0.4f)}, {1, 2}), -0.3f, 0.4f);
  check(RunOp(both, {x, ScalarValue(-0.3f), ScalarValue(0.4f)}), -0.3f, 0.4f);  // read at run time
  check(RunOp(MakeNode("Clip", {"x", "lo"}, {"y"}), {x, ScalarValue(0.1f)}, {1}), 0.1f, INFINITY);
  check(RunOp(MakeNode("Clip", {"x", "", "hi"}, {"y"}), {x, Value(), ScalarValue(0.2f)}, {2}),
        -INFINITY, 0.2f);
  check(RunOp(MakeNode("Clip", {"x"}, {"y"}), {x}), -INFINITY, INFINITY);
  const Node old = MakeNode("Clip", {"x"}, {"y"}, {{"min", -0.5f}, {"max", 0.25f}});
  check(RunOp(old, {x}, {}, true, 6), -0.5f, 0.25f);
  // min > max: ONNX applies max last.
  check(RunOp(both, {x, ScalarValue(0.5f), ScalarValue(0.2f)}, {1, 2}), 0.5f, 0.2f);
  testing::OpRun nan =
      RunOp(MakeNode("Clip", {"x", "lo"}, {"y"}), {ScalarValue(NAN), ScalarValue(0.0f)});
  EXPECT_TRUE(std::isnan(nan.outputs[0].floats[0]));
}

TEST(Clip, GradientPassesInsideTheBounds) {
  Value x = RandomValue({3, 5}, 2);
  for (float& f : x.floats) {  // away from the bounds' kinks
    if (std::fabs(f - 0.4f) < 0.05f || std::fabs(f + 0.3f) < 0.05f) f += 0.1f;
  }
  const Node n = MakeNode("Clip", {"x", "lo", "hi"}, {"y"});
  testing::ExpectGradientsMatch(n, {x, ScalarValue(-0.3f), ScalarValue(0.4f)}, {0}, {1, 2});
  testing::OpRun run = RunOp(n, {x, ScalarValue(-0.3f), ScalarValue(0.4f)}, {1, 2});
  EXPECT_FALSE(run.op->HasGradient(1));
}

TEST(Clip, FactoryErrors) {
  const Value x = RandomValue({2}, 1);
  testing::OpRun run = RunOp(MakeNode("Clip", {"x", "lo"}, {"y"}), {x, RandomValue({2}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find("min"), std::string::npos) << run.status;
  run = RunOp(MakeNode("Clip", {"x"}, {"y"}, {{"min", 0.0f}}), {x});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  run = RunOp(MakeNode("Clip", {"x"}, {"y"}), {testing::IntValue({1}, {1})});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  run = RunOp(MakeNode("Clip", {"x", "lo"}, {"y"}), {x, testing::IntValue({}, {1})}, {1});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
