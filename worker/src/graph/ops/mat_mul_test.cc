#include <gtest/gtest.h>

#include <vector>

#include "easyscale/worker/detmath.h"
#include "easyscale/worker/kernel_formulas.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

const Node kMatMul = MakeNode("MatMul", {"a", "b"}, {"y"});

// One product A_a B_b as the documented order runs it.
std::vector<float> Product(const float* a, const float* b, int64_t m, int64_t n, int64_t k) {
  std::vector<float> y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      y[i * n + j] = formulas::GemmOutput(static_cast<int>(k), a + i * k, 1, b + j, n, 0.0f);
    }
  }
  return y;
}

TEST(MatMulTest, BatchesBroadcast) {
  // A [2, 1, 3, 4] against B [3, 4, 5]: Y [2, 3, 3, 5], A's batch repeats over
  // B's three, B's over A's two.
  Value a = RandomValue({2, 1, 3, 4}, 1), b = RandomValue({3, 4, 5}, 2);
  testing::OpRun run = RunOp(kMatMul, {a, b});
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.infos[0].shape, (Shape{2, 3, 3, 5}));
  for (int64_t s = 0; s < 2; ++s) {
    for (int64_t t = 0; t < 3; ++t) {
      std::vector<float> want = Product(&a.floats[s * 12], &b.floats[t * 20], 3, 5, 4);
      std::vector<float> got(run.outputs[0].floats.begin() + (s * 3 + t) * 15,
                             run.outputs[0].floats.begin() + (s * 3 + t + 1) * 15);
      EXPECT_EQ(got, want) << s << " " << t;
    }
  }
  ExpectGradientsMatch(kMatMul, {a, b}, {0, 1});
}

TEST(MatMulTest, SharedRightOperandFoldsIntoRows) {
  Value a = RandomValue({2, 3, 4}, 1), b = RandomValue({4, 5}, 2);
  testing::OpRun run = RunOp(kMatMul, {a, b});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 3, 5}));
  EXPECT_EQ(run.outputs[0].floats, Product(a.floats.data(), b.floats.data(), 6, 5, 4));
  ExpectGradientsMatch(kMatMul, {a, b}, {0, 1});
}

TEST(MatMulTest, Vectors) {
  Value v = RandomValue({4}, 1), m = RandomValue({4, 3}, 2), w = RandomValue({3}, 3);
  testing::OpRun run = RunOp(kMatMul, {v, m});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{3}));
  EXPECT_EQ(run.outputs[0].floats, Product(v.floats.data(), m.floats.data(), 1, 3, 4));
  run = RunOp(kMatMul, {m, w});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{4}));
  EXPECT_EQ(run.outputs[0].floats, Product(m.floats.data(), w.floats.data(), 4, 1, 3));
  run = RunOp(kMatMul, {w, w});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{}));
  ExpectGradientsMatch(kMatMul, {v, m}, {0, 1});
  ExpectGradientsMatch(kMatMul, {RandomValue({2, 4, 3}, 4), w}, {0, 1});
}

// dB of A [batches, m, k] against one shared B [k, n] in the documented
// order: GemmOutput over every row, in k blocks of k_block.
std::vector<float> WeightGradient(const Value& a, const Value& dy, int64_t rows, int64_t k,
                                  int64_t n, int k_block) {
  std::vector<float> db(k * n);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t j = 0; j < n; ++j) {
      db[c * n + j] = formulas::GemmOutput(static_cast<int>(rows), &a.floats[c], k, &dy.floats[j],
                                           n, 0.0f, k_block);
    }
  }
  return db;
}

Value SharedWeightGradient(const Value& a, const Value& b, const Value& dy) {
  testing::OpRun run = RunOp(kMatMul, {a, b});
  EXPECT_TRUE(run.status.ok()) << run.status;
  Value db;
  db.Reset(DType::kFloat32, b.shape);
  RunContext ctx;
  run.op->Backward(ctx, {&a, &b}, {&run.outputs[0]}, {&dy}, {nullptr, &db});
  return db;
}

TEST(MatMulTest, WeightGradientKBlocksAreWholeSamplesWhereOutputsAreFew) {
  // The encoder's projections (batch 32, T = 128): 16 and 4 blocks.
  EXPECT_EQ(formulas::WeightGradientKBlock(32, 128, 768, 768), 256);
  EXPECT_EQ(formulas::WeightGradientKBlock(32, 128, 768, 3072), 1024);
  // ResNet-50's 7x7 stage, 512 filters of 3x3x512 (batch 64): 16 samples.
  EXPECT_EQ(formulas::WeightGradientKBlock(64, 49, 512, 4608), 784);
  // A sample past one block, many outputs, a count no group size divides
  // evenly into the wanted blocks: kGemmKBlock, or single samples.
  EXPECT_EQ(formulas::WeightGradientKBlock(64, 12544, 32, 9), formulas::kGemmKBlock);
  EXPECT_EQ(formulas::WeightGradientKBlock(4, 1024, 4096, 4096), formulas::kGemmKBlock);
  EXPECT_EQ(formulas::WeightGradientKBlock(5, 1, 2048, 2048), 1);
  // One sample: its rows are one block (kGemmKBlock's order).
  EXPECT_EQ(formulas::WeightGradientKBlock(1, 300, 64, 64), formulas::kGemmKBlock);
}

TEST(MatMulTest, SharedWeightGradientRunsItsKBlocks) {
  // A B shared by 3 batches, few outputs: one batch a block, each product
  // from 0, added in batch order.
  Value a = RandomValue({3, 2, 4}, 1), b = RandomValue({1, 4, 5}, 2),
        dy = RandomValue({3, 2, 5}, 3);
  EXPECT_EQ(SharedWeightGradient(a, b, dy).floats, WeightGradient(a, dy, 6, 4, 5, 2));
  ExpectGradientsMatch(kMatMul, {a, b}, {0, 1});
  // 256 output tiles of 128x128 want 2 blocks: 3 batches each.
  a = RandomValue({6, 1, 2048}, 4), b = RandomValue({2048, 2048}, 5),
  dy = RandomValue({6, 1, 2048}, 6);
  EXPECT_EQ(SharedWeightGradient(a, b, dy).floats, WeightGradient(a, dy, 6, 2048, 2048, 3));
  // 5 batches split no way into 2 blocks: one a batch.
  a = RandomValue({5, 1, 2048}, 7), dy = RandomValue({5, 1, 2048}, 8);
  EXPECT_EQ(SharedWeightGradient(a, b, dy).floats, WeightGradient(a, dy, 5, 2048, 2048, 1));
  // Batches of 4,100 rows: kGemmKBlock blocks, the first ending inside batch 0.
  a = RandomValue({2, 4100, 3}, 9), b = RandomValue({3, 5}, 10), dy = RandomValue({2, 4100, 5}, 11);
  EXPECT_EQ(SharedWeightGradient(a, b, dy).floats,
            WeightGradient(a, dy, 8200, 3, 5, formulas::kGemmKBlock));
}

TEST(MatMulTest, LargeProductsKeepTheOrder) {
  // cpu::Gemm's register tiles, partial tiles and cache chunks, and a K past
  // one kGemmKBlock: every element is still GemmOutput's chain.
  const int64_t m = 13, n = 37, k = formulas::kGemmKBlock + 300;
  Value a = RandomValue({m, k}, 1), b = RandomValue({k, n}, 2);
  testing::OpRun run = RunOp(kMatMul, {a, b});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].floats, Product(a.floats.data(), b.floats.data(), m, n, k));
}

TEST(MatMulTest, FactoryErrors) {
  auto error = [](Shape a, Shape b) {
    testing::OpRun run = RunOp(kMatMul, {RandomValue(a, 1), RandomValue(b, 2)});
    EXPECT_FALSE(run.status.ok());
    EXPECT_NE(run.status.message().find("MatMul_0"), std::string::npos) << run.status;
    return std::string(run.status.message());
  };
  EXPECT_NE(error({3, 4}, {5, 2}).find("K"), std::string::npos);
  EXPECT_NE(error({2, 3, 4}, {3, 4, 2}).find("broadcast"), std::string::npos);
  EXPECT_NE(error({}, {3}).find("1-D"), std::string::npos);
}

// graph/fusion.h's node: a bias of Y's last dimension over a product whose
// rows fold (fusion_test.cc checks its bits against MatMul and Add).
TEST(MatMulTest, FusedBiasFactoryErrors) {
  const Node node = MakeNode("MatMul+Add", {"a", "b", "bias"}, {"z"});
  auto error = [&](Shape a, Shape b, Shape bias) {
    testing::OpRun run = RunOp(node, {RandomValue(a, 1), RandomValue(b, 2), RandomValue(bias, 3)});
    EXPECT_FALSE(run.status.ok());
    return std::string(run.status.message());
  };
  EXPECT_NE(error({2, 3, 4}, {4, 5}, {4}).find("input bias must have shape [5], has [4]"),
            std::string::npos);
  EXPECT_NE(error({2, 3, 4}, {2, 4, 5}, {5}).find("B must be 2-D"), std::string::npos);
  EXPECT_TRUE(RunOp(node, {RandomValue({2, 3, 4}, 1), RandomValue({4, 5}, 2), RandomValue({5}, 3)})
                  .status.ok());
}

// B stored transposed (graph/fusion.h's FuseTransposedWeights): [N, K].
TEST(MatMulTest, TransposedWeightFactoryErrors) {
  const Node product = MakeNode("Transpose+MatMul", {"a", "w"}, {"y"});
  const Node biased = MakeNode("Transpose+MatMul+Add", {"a", "w", "bias"}, {"z"});
  auto error = [](const Node& node, std::vector<Value> inputs) {
    testing::OpRun run = RunOp(node, std::move(inputs));
    EXPECT_FALSE(run.status.ok());
    return std::string(run.status.message());
  };
  EXPECT_NE(error(product, {RandomValue({2, 3, 4}, 1), RandomValue({2, 5, 4}, 2)})
                .find("input B must be 2-D (a weight read transposed), has [2, 5, 4]"),
            std::string::npos);
  EXPECT_NE(error(product, {RandomValue({2, 3, 4}, 1), RandomValue({5, 3}, 2)})
                .find("disagree on K: 4 and 3"),
            std::string::npos);
  EXPECT_NE(error(biased, {RandomValue({2, 3, 4}, 1), RandomValue({5, 4}, 2), RandomValue({4}, 3)})
                .find("input bias must have shape [5], has [4]"),
            std::string::npos);
  const testing::OpRun run = RunOp(product, {RandomValue({2, 3, 4}, 1), RandomValue({5, 4}, 2)});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 3, 5}));
  EXPECT_TRUE(
      RunOp(biased, {RandomValue({2, 3, 4}, 1), RandomValue({5, 4}, 2), RandomValue({5}, 3)})
          .status.ok());
}

// Views of the operands and the output (graph/fusion.h's FuseTransposedOperands).
TEST(MatMulTest, StridedFactoryErrors) {
  auto error = [](std::vector<std::pair<std::string, std::vector<int64_t>>> perms, Shape a,
                  Shape b) {
    Node node = MakeNode("StridedMatMul", {"a", "b"}, {"y"});
    for (auto& [name, perm] : perms) node.attributes[name] = std::move(perm);
    testing::OpRun run = RunOp(node, {RandomValue(a, 1), RandomValue(b, 2)});
    return run.status.ok() ? std::string("ok") : std::string(run.status.message());
  };
  const auto has = [](const std::string& message, const char* part) {
    return message.find(part) != std::string::npos;
  };
  EXPECT_PRED2(has, error({{"perm_a", {0, 2, 1}}}, {2, 3, 4, 5}, {2, 3, 5, 4}),
               "attribute perm_a has 3 entries for a tensor of rank 4");
  EXPECT_PRED2(has, error({{"perm_b", {0, 1, 1, 3}}}, {2, 3, 4, 5}, {2, 3, 5, 4}),
               "attribute perm_b is not a permutation of 0..3");
  EXPECT_PRED2(has, error({}, {3, 4}, {4, 5}), "must both have rank 3 or 4, have [3, 4]");
  EXPECT_PRED2(has, error({}, {2, 3, 4, 5}, {3, 2, 5, 4}), "the same batch dimensions");
  EXPECT_PRED2(has, error({{"perm_a", {0, 3, 1, 2}}}, {2, 3, 4, 5}, {2, 5, 3, 4}),
               "moves the tensor's last dimension into its batch dimensions");
  EXPECT_PRED2(has, error({{"perm_y", {0, 2, 3, 1}}}, {2, 3, 4, 5}, {2, 3, 5, 4}),
               "attribute perm_y moves the product's rows and columns");
  EXPECT_PRED2(
      has, error({{"shape_a", {2, 3, 4, 6}}}, {2, 3, 20}, {2, 3, 5, 4}),
      "attribute shape_a [2, 3, 4, 6] does not hold the 120 elements of input A [2, 3, 20]");
  EXPECT_EQ(error({{"perm_a", {0, 2, 1, 3}}, {"perm_y", {0, 2, 1, 3}}}, {2, 4, 3, 5}, {2, 3, 5, 6}),
            "ok");
  EXPECT_EQ(error({{"shape_a", {2, 3, 4, 5}}, {"shape_y", {2, 12, 4}}}, {2, 3, 20}, {2, 3, 5, 4}),
            "ok");
}

}  // namespace
}  // namespace easyscale::graph
