#include <gtest/gtest.h>

#include <cmath>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

double Reference(double x) { return 1.0 / (1.0 + std::exp(-x)); }

Value Input(Shape shape, uint32_t seed) {
  Value v = RandomValue(std::move(shape), seed);
  for (float& x : v.floats) x = 8.0f * x;
  return v;
}

TEST(Sigmoid, ForwardMatchesReference) {
  const Node n = MakeNode("Sigmoid", {"x"}, {"y"});
  const Value x = Input({3, 1, 7}, 1);
  testing::OpRun run = RunOp(n, {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, x.shape);
  for (size_t i = 0; i < x.floats.size(); ++i) {
    const double want = Reference(x.floats[i]);
    EXPECT_NEAR(run.outputs[0].floats[i], want, 4e-7 * (1e-30 + std::fabs(want))) << x.floats[i];
  }
}

TEST(Sigmoid, GradientMatches) {
  testing::ExpectGradientsMatch(MakeNode("Sigmoid", {"x"}, {"y"}), {Input({3, 5}, 2)}, {0});
}

TEST(Sigmoid, FactoryErrors) {
  testing::OpRun run = RunOp(MakeNode("Sigmoid", {"x"}, {"y"}), {testing::IntValue({2}, {1, 2})});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find("Sigmoid_0"), std::string::npos) << run.status;
  run = RunOp(MakeNode("Sigmoid", {"x", "z"}, {"y"}), {RandomValue({2}, 1), RandomValue({2}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
