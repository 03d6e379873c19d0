#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "easyscale/worker/kernel_formulas.h"
#include "graph/program.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;
using testing::ScalarValue;

const std::vector<std::string> kInputs = {"x", "scale", "b", "mean", "var"};

std::vector<Value> Inputs(Shape x_shape) {
  const int64_t c = x_shape[1];
  Value var = RandomValue({c}, 5);
  for (float& v : var.floats) v = 0.5f + v * v;  // positive
  return {RandomValue(x_shape, 1), RandomValue({c}, 2), RandomValue({c}, 3), RandomValue({c}, 4),
          var};
}

// Per channel: batch mean, biased and unbiased variance, in double.
struct Stats {
  std::vector<double> mean, var, unbiased;
};
Stats BatchStats(const Value& x) {
  const int64_t n = x.shape[0], c = x.shape[1], p = NumElements(x.shape) / (n * c);
  Stats s{std::vector<double>(c), std::vector<double>(c), std::vector<double>(c)};
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sq = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t q = 0; q < p; ++q) sum += x.floats[(b * c + ch) * p + q];
    s.mean[ch] = sum / (n * p);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t q = 0; q < p; ++q) {
        const double d = x.floats[(b * c + ch) * p + q] - s.mean[ch];
        sq += d * d;
      }
    s.var[ch] = sq / (n * p);
    s.unbiased[ch] = sq / (n * p - 1);
  }
  return s;
}

void ExpectNormalized(const Value& y, const std::vector<Value>& in, const std::vector<double>& mean,
                      const std::vector<double>& var, double eps) {
  const int64_t n = y.shape[0], c = y.shape[1], p = NumElements(y.shape) / (n * c);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t q = 0; q < p; ++q) {
        const size_t e = (b * c + ch) * p + q;
        const double want =
            (in[0].floats[e] - mean[ch]) / std::sqrt(var[ch] + eps) * in[1].floats[ch] +
            in[2].floats[ch];
        EXPECT_NEAR(y.floats[e], want, 1e-5) << e;
      }
}

TEST(BatchNormalizationTest, TrainingModeUsesBatchStatisticsAndUpdatesRunningOnes) {
  std::vector<Value> in = Inputs({3, 2, 5, 3});
  Node n = MakeNode("BatchNormalization", kInputs, {"y", "rm", "rv"},
                    {{"training_mode", int64_t{1}}, {"epsilon", 1e-3f}, {"momentum", 0.9f}});
  testing::OpRun run = RunOp(n, in, {}, /*training=*/true, /*opset=*/15);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.op->StateUpdates(), (std::vector<std::pair<size_t, size_t>>{{1, 3}, {2, 4}}));
  const Stats s = BatchStats(in[0]);
  ExpectNormalized(run.outputs[0], in, s.mean, s.var, 1e-3);
  for (int64_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(run.outputs[1].floats[c], 0.9 * in[3].floats[c] + 0.1 * s.mean[c], 1e-6);
    // PyTorch's update: the unbiased batch variance.
    EXPECT_NEAR(run.outputs[2].floats[c], 0.9 * in[4].floats[c] + 0.1 * s.unbiased[c], 1e-6);
  }
}

TEST(BatchNormalizationTest, Opset13FiveOutputs) {
  std::vector<Value> in = Inputs({4, 3});
  Node n = MakeNode("BatchNormalization", kInputs, {"y", "rm", "rv", "sm", "sv"});
  testing::OpRun run = RunOp(n, in, {}, true, /*opset=*/13);
  ASSERT_TRUE(run.status.ok()) << run.status;
  const Stats s = BatchStats(in[0]);
  ExpectNormalized(run.outputs[0], in, s.mean, s.var, 1e-5);
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_NEAR(run.outputs[3].floats[c], s.mean[c], 1e-6);
    EXPECT_NEAR(run.outputs[4].floats[c], s.var[c], 1e-6);
  }
  // One output: inference.
  n.outputs = {"y"};
  run = RunOp(n, in, {}, true, 13);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_TRUE(run.op->StateUpdates().empty());
}

TEST(BatchNormalizationTest, InferenceUsesRunningStatistics) {
  std::vector<Value> in = Inputs({2, 3, 4});
  const std::vector<double> mean(in[3].floats.begin(), in[3].floats.end());
  const std::vector<double> var(in[4].floats.begin(), in[4].floats.end());
  Node inference = MakeNode("BatchNormalization", kInputs, {"y"});
  testing::OpRun run = RunOp(inference, in, {}, true, 15);
  ASSERT_TRUE(run.status.ok()) << run.status;
  ExpectNormalized(run.outputs[0], in, mean, var, 1e-5);
  // A training node in an evaluation pass: running statistics, passed through.
  Node training =
      MakeNode("BatchNormalization", kInputs, {"y", "rm", "rv"}, {{"training_mode", int64_t{1}}});
  run = RunOp(training, in, {}, /*training=*/false, 15);
  ASSERT_TRUE(run.status.ok()) << run.status;
  ExpectNormalized(run.outputs[0], in, mean, var, 1e-5);
  EXPECT_EQ(run.outputs[1].floats, in[3].floats);
  EXPECT_EQ(run.outputs[2].floats, in[4].floats);
}

TEST(BatchNormalizationTest, Gradients) {
  Node training =
      MakeNode("BatchNormalization", kInputs, {"y", "rm", "rv"}, {{"training_mode", int64_t{1}}});
  // The op_check helper runs opset 17; only Y carries weight.
  ExpectGradientsMatch(training, Inputs({3, 2, 3, 2}), {0, 1, 2}, {}, 1e-2, 2e-2, 1);
  ExpectGradientsMatch(training, Inputs({5, 3}), {0, 1, 2}, {}, 1e-2, 2e-2, 1);
  Node inference = MakeNode("BatchNormalization", kInputs, {"y"});
  ExpectGradientsMatch(inference, Inputs({2, 3, 4}), {0, 1, 2});
}

TEST(BatchNormalizationTest, FactoryErrors) {
  auto error = [](Node n, std::vector<Value> in, int64_t opset = 15) {
    testing::OpRun run = RunOp(n, in, {}, true, opset);
    EXPECT_FALSE(run.status.ok());
    EXPECT_NE(run.status.message().find("BatchNormalization_0"), std::string::npos) << run.status;
    return std::string(run.status.message());
  };
  Node n = MakeNode("BatchNormalization", kInputs, {"y"});
  std::vector<Value> bad = Inputs({2, 3, 4});
  bad[1] = RandomValue({4}, 1);
  EXPECT_NE(error(n, bad).find("scale"), std::string::npos);
  Node mode = MakeNode("BatchNormalization", kInputs, {"y"}, {{"training_mode", int64_t{0}}});
  EXPECT_NE(error(mode, Inputs({2, 3, 4}), 13).find("training_mode"), std::string::npos);
  Node three = MakeNode("BatchNormalization", kInputs, {"y", "rm", "rv"});
  EXPECT_NE(error(three, Inputs({2, 3})).find("training_mode"), std::string::npos);
  three.attributes["training_mode"] = int64_t{2};
  EXPECT_NE(error(three, Inputs({2, 3})).find("training_mode"), std::string::npos);
  Node four = MakeNode("BatchNormalization", kInputs, {"y", "rm", "rv", "sm"},
                       {{"training_mode", int64_t{1}}});
  EXPECT_NE(error(four, Inputs({2, 3})).find("outputs"), std::string::npos);
  Node eps = MakeNode("BatchNormalization", kInputs, {"y"}, {{"epsilon", int64_t{1}}});
  EXPECT_NE(error(eps, Inputs({2, 3})).find("epsilon"), std::string::npos);
}

// BatchNormalization+Clip (graph/fusion.h): the plain node's outputs, each
// clipped; bounds as constant inputs 5 and 6, or attributes before opset 11.
TEST(BatchNormalizationTest, FusedClipClipsThePlainOutputs) {
  std::vector<Value> in = Inputs({2, 3, 4});
  for (const int64_t opset : {int64_t{9}, int64_t{15}}) {
    SCOPED_TRACE(opset);
    // Training: from opset 14 by the attribute, before by the statistics' outputs.
    Node plain_node = MakeNode("BatchNormalization", kInputs, {"y", "rm", "rv"});
    if (opset >= 14) plain_node.attributes["training_mode"] = int64_t{1};
    const testing::OpRun plain = RunOp(plain_node, in, {}, true, opset);
    ASSERT_TRUE(plain.status.ok()) << plain.status;
    Node fused = plain_node;
    fused.op = "BatchNormalization+Clip";
    std::vector<Value> fused_in = in;
    std::vector<size_t> constants;
    if (opset < 11) {
      fused.attributes["min"] = -0.25f;
      fused.attributes["max"] = 0.5f;
    } else {
      fused.inputs.insert(fused.inputs.end(), {"lo", "hi"});
      fused_in.insert(fused_in.end(), {ScalarValue(-0.25f), ScalarValue(0.5f)});
      constants = {5, 6};
    }
    const testing::OpRun run = RunOp(fused, fused_in, constants, true, opset);
    ASSERT_TRUE(run.status.ok()) << run.status;
    std::vector<float> want = plain.outputs[0].floats;
    for (float& v : want) v = formulas::Clip(v, -0.25f, 0.5f);
    EXPECT_EQ(run.outputs[0].floats, want);
    EXPECT_EQ(run.outputs[1].floats, plain.outputs[1].floats);
    EXPECT_EQ(run.outputs[2].floats, plain.outputs[2].floats);
  }
  // Bounds computed in the pass cannot fuse: the op needs them at load time.
  const Node fused = MakeNode("BatchNormalization+Clip", {"x", "scale", "b", "mean", "var", "lo"},
                              {"y", "rm", "rv"}, {{"training_mode", int64_t{1}}});
  std::vector<Value> with_bound = in;
  with_bound.push_back(ScalarValue(0.0f));
  const testing::OpRun run = RunOp(fused, with_bound, {}, true, 15);
  EXPECT_FALSE(run.status.ok());
  EXPECT_NE(run.status.message().find("bounds must be constants"), std::string::npos) << run.status;
}

TEST(BatchNormalizationTest, ProgramWritesRunningStatisticsBack) {
  std::vector<Value> in = Inputs({4, 2, 3});
  Graph g;
  g.opset = 15;
  g.nodes.push_back(
      MakeNode("BatchNormalization", kInputs, {"y", "rm", "rv"}, {{"training_mode", int64_t{1}}}));
  g.inputs = {"x"};
  g.outputs = {"y"};
  for (size_t i = 0; i < kInputs.size(); ++i) {
    g.values[kInputs[i]] = {DType::kFloat32, in[i].shape};
    if (i > 0) g.initializers[kInputs[i]] = testing::ToConstant(in[i]);
  }
  g.values["y"] = {DType::kFloat32, in[0].shape};
  g.values["rm"] = g.values["rv"] = {DType::kFloat32, {2}};
  auto program = Program::Create(std::move(g));
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->state(), (std::vector<std::string>{"mean", "var"}));
  EXPECT_EQ((*program)->parameters(), (std::vector<std::string>{"scale", "b"}));
  (*program)->Input(0) = in[0];
  testing::OpRun run = RunOp(
      MakeNode("BatchNormalization", kInputs, {"y", "rm", "rv"}, {{"training_mode", int64_t{1}}}),
      in, {}, true, 15);
  RunContext ctx;
  (*program)->Forward(ctx);
  EXPECT_EQ((*program)->Output(0).floats, run.outputs[0].floats);
  EXPECT_EQ((*program)->Initializer("mean").floats, run.outputs[1].floats);
  EXPECT_EQ((*program)->Initializer("var").floats, run.outputs[2].floats);
  // An evaluation pass leaves them alone.
  ctx.training = false;
  (*program)->Forward(ctx);
  EXPECT_EQ((*program)->Initializer("mean").floats, run.outputs[1].floats);
}

}  // namespace
}  // namespace easyscale::graph
