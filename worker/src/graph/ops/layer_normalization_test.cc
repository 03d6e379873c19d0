#include <gtest/gtest.h>

#include <cmath>

#include "easyscale/worker/kernel_formulas.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

TEST(LayerNormalization, ForwardMatchesReference) {
  const Value x = RandomValue({2, 3, 4}, 1), scale = RandomValue({3, 4}, 2),
              bias = RandomValue({3, 4}, 3);
  const Node n = MakeNode("LayerNormalization", {"x", "s", "b"}, {"y", "mean", "invstd"},
                          {{"axis", int64_t{1}}, {"epsilon", 1e-3f}});
  testing::OpRun run = RunOp(n, {x, scale, bias});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[1].shape, (Shape{2, 1, 1}));
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < 12; ++j) mean += x.floats[r * 12 + j] / 12.0;
    for (int j = 0; j < 12; ++j) var += std::pow(x.floats[r * 12 + j] - mean, 2) / 12.0;
    const double invstd = 1 / std::sqrt(var + 1e-3);
    EXPECT_NEAR(run.outputs[1].floats[r], mean, 1e-6);
    EXPECT_NEAR(run.outputs[2].floats[r], invstd, 1e-5 * invstd);
    for (int j = 0; j < 12; ++j) {
      const double want = (x.floats[r * 12 + j] - mean) * invstd * scale.floats[j] + bias.floats[j];
      EXPECT_NEAR(run.outputs[0].floats[r * 12 + j], want, 1e-5);
    }
  }
}

TEST(LayerNormalization, GradientsMatch) {
  const Node n = MakeNode("LayerNormalization", {"x", "s", "b"}, {"y"});
  testing::ExpectGradientsMatch(
      n, {RandomValue({3, 5}, 4), RandomValue({5}, 5), RandomValue({5}, 6)}, {0, 1, 2});
  // Over two dimensions, Scale without B, the statistics outputs unweighted.
  const Node m =
      MakeNode("LayerNormalization", {"x", "s"}, {"y", "mean", "invstd"}, {{"axis", int64_t{-2}}});
  testing::ExpectGradientsMatch(m, {RandomValue({3, 2, 3}, 7), RandomValue({2, 3}, 8)}, {0, 1}, {},
                                1e-2, 2e-2, 1);
}

TEST(LayerNormalization, ParameterGradientsSumBlocksOfSamples) {
  // X [2, 3, 4] normalized over its last axis: 6 rows of 2 samples, so dScale
  // and dB sum 3 rows a block from +0, the two blocks added after; dy whose
  // sums the blocks change.
  ASSERT_EQ(formulas::ColumnSumBlockRows(2, 6, 4), 3);
  const Value x = RandomValue({2, 3, 4}, 1), scale = RandomValue({4}, 2),
              bias = RandomValue({4}, 3);
  Value dy = RandomValue({2, 3, 4}, 4);
  for (int r = 0; r < 6; ++r) {
    for (int j = 0; j < 4; ++j) {
      dy.floats[r * 4 + j] = (r == 0 ? 1e8f : r == 3 ? -1e8f : 1.0f) + static_cast<float>(j);
    }
  }
  const Node n = MakeNode("LayerNormalization", {"x", "s", "b"}, {"y"});
  testing::OpRun run = RunOp(n, {x, scale, bias});
  ASSERT_TRUE(run.status.ok()) << run.status;
  Value dx, dscale, dbias;
  dx.Reset(DType::kFloat32, x.shape);
  dscale.Reset(DType::kFloat32, scale.shape);
  dbias.Reset(DType::kFloat32, bias.shape);
  RunContext ctx;
  run.op->Backward(ctx, {&x, &scale, &bias}, {&run.outputs[0]}, {&dy}, {&dx, &dscale, &dbias});
  std::vector<float> want(4), chain(4, 0.0f);
  for (int j = 0; j < 4; ++j) {
    float first = 0.0f, second = 0.0f;
    for (int r = 0; r < 3; ++r) first += dy.floats[r * 4 + j];
    for (int r = 3; r < 6; ++r) second += dy.floats[r * 4 + j];
    want[j] = first + second;
    for (int r = 0; r < 6; ++r) chain[j] += dy.floats[r * 4 + j];
  }
  EXPECT_EQ(dbias.floats, want);
  EXPECT_NE(want, chain);  // the blocks change these sums' bits
}

TEST(LayerNormalization, FactoryErrors) {
  const Value x = RandomValue({2, 3}, 1);
  testing::OpRun run =
      RunOp(MakeNode("LayerNormalization", {"x", "s"}, {"y"}), {x, RandomValue({2}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find("Scale"), std::string::npos) << run.status;
  run = RunOp(MakeNode("LayerNormalization", {"x"}, {"y"}, {{"axis", int64_t{2}}}), {x});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  run = RunOp(MakeNode("LayerNormalization", {"x"}, {"y"}, {{"stash_type", int64_t{0}}}), {x});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find("LayerNormalization_0"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
