#include <cmath>

#include "easyscale/worker/cpu_kernels.h"
#include "graph/program.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

Node SceNode(std::map<std::string, Attribute> attributes, bool weights = false,
             bool log_prob = false) {
  std::vector<std::string> in = {"scores", "labels"};
  if (weights) in.push_back("weights");
  std::vector<std::string> out = {"loss"};
  if (log_prob) out.push_back("log_prob");
  return MakeNode("SoftmaxCrossEntropyLoss", in, out, std::move(attributes));
}

// The ONNX definition in double: per-position losses (0 where ignored) and
// the denominator of the mean.
struct Naive {
  std::vector<double> losses, log_probs;
  double denominator = 0;
};

Naive NaiveSce(const Value& scores, const Value& labels, const Value* weights, int64_t ignore) {
  const int64_t n = scores.shape[0], c = scores.shape[1], d = scores.size() / (n * c);
  Naive out;
  out.log_probs.resize(scores.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < c; ++k) sum += std::exp(scores.floats[(i * c + k) * d + j]);
      for (int64_t k = 0; k < c; ++k) {
        out.log_probs[(i * c + k) * d + j] = scores.floats[(i * c + k) * d + j] - std::log(sum);
      }
      const int64_t label = labels.ints[i * d + j];
      if (label == ignore) {
        out.losses.push_back(0);
        continue;
      }
      const double w = weights ? weights->floats[label] : 1.0;
      out.losses.push_back(-w * out.log_probs[(i * c + label) * d + j]);
      out.denominator += w;
    }
  }
  return out;
}

TEST(SoftmaxCrossEntropyLossTest, MeanMatchesTheBuiltInKernelBitForBit) {
  const Value scores = RandomValue({5, 7}, 1);
  const Value labels = IntValue({5}, {0, 6, 3, 3, 1});
  const Node n = SceNode({});
  testing::OpRun run = RunOp(n, {scores, labels});
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.infos[0].shape, Shape{});

  const std::vector<int32_t> labels32 = {0, 6, 3, 3, 1};
  std::vector<float> dlogits(35);
  const float loss =
      cpu::SoftmaxCrossEntropy(5, 7, scores.floats.data(), labels32.data(), dlogits.data());
  EXPECT_EQ(run.outputs[0].floats[0], loss);

  Value dloss, dscores;
  dloss.Reset(DType::kFloat32, {});
  dloss.floats = {1.0f};
  dscores.Reset(DType::kFloat32, {5, 7});
  RunContext ctx;
  run.op->Backward(ctx, {&scores, &labels}, {&run.outputs[0]}, {&dloss}, {&dscores, nullptr});
  EXPECT_EQ(dscores.floats, dlogits);
}

TEST(SoftmaxCrossEntropyLossTest, ReductionsWeightsIgnoreIndexAndLogProbMatchNaive) {
  const Value scores = RandomValue({3, 4, 2}, 2);
  const Value labels = IntValue({3, 2}, {0, 3, -1, 2, 1, -1});
  const Value weights = RandomValue({4}, 3);
  for (bool with_weights : {false, true}) {
    const Naive want = NaiveSce(scores, labels, with_weights ? &weights : nullptr, -1);
    double sum = 0;
    for (double l : want.losses) sum += l;
    for (const std::string reduction : {"none", "sum", "mean"}) {
      const Node n =
          SceNode({{"reduction", reduction}, {"ignore_index", int64_t{-1}}}, with_weights, true);
      std::vector<Value> in = {scores, labels};
      if (with_weights) in.push_back(weights);
      testing::OpRun run = RunOp(n, in);
      ASSERT_TRUE(run.status.ok()) << run.status;
      ASSERT_EQ(run.infos[1].shape, scores.shape);
      for (size_t e = 0; e < want.log_probs.size(); ++e) {
        EXPECT_NEAR(run.outputs[1].floats[e], want.log_probs[e], 1e-5) << e;
      }
      if (reduction == "none") {
        ASSERT_EQ(run.infos[0].shape, (Shape{3, 2}));
        for (size_t e = 0; e < want.losses.size(); ++e) {
          EXPECT_NEAR(run.outputs[0].floats[e], want.losses[e], 1e-5) << e;
        }
      } else {
        ASSERT_EQ(run.infos[0].shape, Shape{});
        const double expected = reduction == "sum" ? sum : sum / want.denominator;
        EXPECT_NEAR(run.outputs[0].floats[0], expected, 1e-5 * (1 + std::abs(expected)))
            << reduction << " weights " << with_weights;
      }
    }
  }
}

TEST(SoftmaxCrossEntropyLossTest, Gradients) {
  const Value scores = RandomValue({3, 4, 2}, 4);
  const Value labels = IntValue({3, 2}, {0, 3, 7, 2, 1, 7});
  ExpectGradientsMatch(SceNode({{"ignore_index", int64_t{7}}}, true, true),
                       {scores, labels, RandomValue({4}, 5)}, {0});
  ExpectGradientsMatch(SceNode({{"reduction", std::string("none")}}, false, false),
                       {RandomValue({4, 3}, 6), IntValue({4}, {2, 0, 1, 2})}, {0});
  ExpectGradientsMatch(SceNode({{"reduction", std::string("sum")}}, false, false),
                       {RandomValue({4, 3}, 7), IntValue({4}, {2, 0, 1, 2})}, {0});
}

// An embedding lookup, dropout and the loss as a program runs them: the
// dropout stream advances once per pass and the embedding's gradient matches
// finite differences of the loss (the mask is the same for a fixed counter).
TEST(SoftmaxCrossEntropyLossTest, TrainsAnEmbeddingThroughDropoutInAProgram) {
  auto constant = [](DType t, Shape s, std::vector<float> f, std::vector<int64_t> i) {
    ConstantTensor c;
    c.dtype = t;
    c.shape = std::move(s);
    c.floats = std::move(f);
    c.ints = std::move(i);
    return c;
  };
  Graph g;
  g.opset = 17;
  g.nodes = {MakeNode("Gather", {"emb", "ids"}, {"x"}),
             MakeNode("Dropout", {"x", "ratio", "train"}, {"h"}),
             MakeNode("SoftmaxCrossEntropyLoss", {"h", "labels"}, {"loss"})};
  g.initializers["emb"] = constant(DType::kFloat32, {5, 3}, RandomValue({5, 3}, 9).floats, {});
  g.initializers["ratio"] = constant(DType::kFloat32, {}, {0.25f}, {});
  g.initializers["train"] = constant(DType::kBool, {}, {}, {1});
  g.constants = {"ratio", "train"};
  g.inputs = {"ids", "labels"};
  g.outputs = {"loss"};
  g.values = {{"emb", {DType::kFloat32, {5, 3}}}, {"ratio", {DType::kFloat32, {}}},
              {"train", {DType::kBool, {}}},      {"ids", {DType::kInt64, {4}}},
              {"labels", {DType::kInt64, {4}}},   {"x", {DType::kFloat32, {4, 3}}},
              {"h", {DType::kFloat32, {4, 3}}},   {"loss", {DType::kFloat32, {}}}};
  auto program = Program::Create(g);
  ASSERT_TRUE(program.ok()) << program.status();
  Program& p = **program;
  ASSERT_EQ(p.parameters(), std::vector<std::string>{"emb"});
  p.Input(0).ints = {4, 1, 4, 0};
  p.Input(1).ints = {2, 0, 1, 1};

  RunContext ctx;
  ctx.dropout_key = {11, 22};
  uint64_t counter = 0;
  ctx.dropout_counter = &counter;
  auto loss_at = [&](uint64_t base) {
    counter = base;
    p.Forward(ctx);
    return static_cast<double>(p.Output(0).floats[0]);
  };
  loss_at(5);
  EXPECT_EQ(counter, 5u + 3u);  // 12 elements: ceil(12 / 4) blocks
  Value seed;
  seed.Reset(DType::kFloat32, {});
  seed.floats = {1.0f};
  p.Backward(ctx, 0, seed);
  const Value grad = p.Gradient("emb");
  std::vector<float>& emb = p.Initializer("emb").floats;
  for (size_t e = 0; e < emb.size(); ++e) {
    const float saved = emb[e];
    emb[e] = saved + 1e-2f;
    const double plus = loss_at(5);
    emb[e] = saved - 1e-2f;
    const double minus = loss_at(5);
    emb[e] = saved;
    const double numeric = (plus - minus) / 2e-2;
    EXPECT_NEAR(grad.floats[e], numeric, 2e-2 * (1 + std::abs(numeric))) << e;
  }
  EXPECT_EQ(grad.floats[3 * 3], 0.0f);  // row 3 is never looked up
}

TEST(SoftmaxCrossEntropyLossTest, Errors) {
  const Value scores = RandomValue({2, 3}, 1);
  const Value labels = IntValue({2}, {0, 1});
  auto message = [](const Node& n, const std::vector<Value>& in) {
    testing::OpRun run = RunOp(n, in);
    EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
    EXPECT_NE(run.status.message().find("SoftmaxCrossEntropyLoss_0"), std::string::npos)
        << run.status;
    return std::string(run.status.message());
  };
  EXPECT_NE(message(SceNode({}), {scores, IntValue({3}, {0, 1, 2})}).find("labels input"),
            std::string::npos);
  EXPECT_NE(message(SceNode({}), {scores, RandomValue({2}, 2)}).find("labels input"),
            std::string::npos);
  EXPECT_NE(message(SceNode({}), {RandomValue({2}, 2), labels}).find("scores input"),
            std::string::npos);
  EXPECT_NE(message(SceNode({}, true), {scores, labels, RandomValue({2}, 3)}).find("weights"),
            std::string::npos);
  EXPECT_NE(message(SceNode({{"reduction", std::string("avg")}}), {scores, labels})
                .find("attribute reduction avg"),
            std::string::npos);
}

}  // namespace
}  // namespace easyscale::graph
