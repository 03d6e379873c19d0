#include <gtest/gtest.h>

#include <cmath>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

double Reference(double x) { return x < 0 ? 0.0 : x; }

Value Input(Shape shape, uint32_t seed) {
  Value v = RandomValue(std::move(shape), seed);
  for (float& x : v.floats) x = x + (x < 0 ? -0.05f : 0.05f);  // away from the kink
  return v;
}

TEST(Relu, ForwardMatchesReference) {
  const Node n = MakeNode("Relu", {"x"}, {"y"});
  const Value x = Input({3, 1, 7}, 1);
  testing::OpRun run = RunOp(n, {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, x.shape);
  for (size_t i = 0; i < x.floats.size(); ++i) {
    const double want = Reference(x.floats[i]);
    EXPECT_EQ(run.outputs[0].floats[i], static_cast<float>(want)) << x.floats[i];
  }
}

TEST(Relu, GradientMatches) {
  testing::ExpectGradientsMatch(MakeNode("Relu", {"x"}, {"y"}), {Input({3, 5}, 2)}, {0});
}

TEST(Relu, FactoryErrors) {
  testing::OpRun run = RunOp(MakeNode("Relu", {"x"}, {"y"}), {testing::IntValue({2}, {1, 2})});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find("Relu_0"), std::string::npos) << run.status;
  run = RunOp(MakeNode("Relu", {"x", "z"}, {"y"}), {RandomValue({2}, 1), RandomValue({2}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
