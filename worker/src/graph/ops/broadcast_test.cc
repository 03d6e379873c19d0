#include "graph/ops/broadcast.h"

#include <gtest/gtest.h>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

// The operand element an output multi-index reads, computed directly.
int64_t NaiveIndex(const Shape& out, const Shape& s, int64_t o) {
  std::vector<int64_t> idx(out.size());
  for (size_t d = out.size(); d-- > 0;) {
    idx[d] = o % out[d];
    o /= out[d];
  }
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d) {
    const int64_t v = idx[d + out.size() - s.size()];
    i = i * s[d] + (s[d] == 1 ? 0 : v);
  }
  return i;
}

TEST(Broadcast, ShapesAndIndicesMatchNumpyRules) {
  const Node n = testing::MakeNode("Add", {"a", "b"}, {"y"});
  const std::vector<std::pair<Shape, Shape>> cases = {{{2, 3, 4}, {3, 1}}, {{}, {5}},
                                                      {{1, 4}, {3, 1}},    {{2, 1, 3}, {2, 5, 1}},
                                                      {{3}, {}},           {{2, 0, 3}, {3}}};
  const std::vector<Shape> want = {{2, 3, 4}, {5}, {3, 4}, {2, 5, 3}, {3}, {2, 0, 3}};
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& [a, b] = cases[c];
    auto bc = MakeBroadcast(n, a, b);
    ASSERT_TRUE(bc.ok()) << bc.status();
    EXPECT_EQ(bc->out, want[c]);
    int64_t next = 0;
    ForEachBroadcast(*bc, [&](int64_t o, int64_t ia, int64_t ib) {
      EXPECT_EQ(o, next++);
      EXPECT_EQ(ia, NaiveIndex(bc->out, a, o)) << c;
      EXPECT_EQ(ib, NaiveIndex(bc->out, b, o)) << c;
    });
    EXPECT_EQ(next, NumElements(bc->out));
  }
}

TEST(Broadcast, ReduceAddsInAscendingOutputOrder) {
  const Node n = testing::MakeNode("Add", {"a", "b"}, {"y"});
  auto bc = MakeBroadcast(n, {3, 1}, {2, 1, 5});
  ASSERT_TRUE(bc.ok());
  // Terms whose float sum depends on the order.
  std::vector<float> terms(30);
  for (size_t o = 0; o < terms.size(); ++o)
    terms[o] = (o % 3 == 0 ? 1e8f : 1.0f) * (o % 2 ? -1 : 1);
  std::vector<float> ga(3), gb(10), want_a(3, 0.0f), want_b(10, 0.0f);
  ReduceToOperand(
      *bc, 0, [&](int64_t o, int64_t, int64_t) { return terms[o]; }, ga);
  ReduceToOperand(
      *bc, 1, [&](int64_t o, int64_t, int64_t) { return terms[o]; }, gb);
  for (int64_t o = 0; o < 30; ++o) {
    want_a[NaiveIndex(bc->out, {3, 1}, o)] += terms[o];
    want_b[NaiveIndex(bc->out, {2, 1, 5}, o)] += terms[o];
  }
  EXPECT_EQ(ga, want_a);
  EXPECT_EQ(gb, want_b);
}

TEST(Broadcast, ABiasOverLongRowsReducesInBlocksOfSamples) {
  const Node n = testing::MakeNode("Add", {"a", "b"}, {"y"});
  auto block = [&](const Shape& a, const Shape& b, int operand) {
    auto bc = MakeBroadcast(n, a, b);
    EXPECT_TRUE(bc.ok()) << bc.status();
    return BinaryReductionBlock(*bc, operand);
  };
  // The encoder's bias: blocks of 128 rows (one sequence); the full-shape
  // operand is not reduced.
  EXPECT_EQ(block({32, 128, 768}, {768}, 1), 128 * 768);
  EXPECT_EQ(block({32, 128, 768}, {768}, 0), 0);
  // 4,096 one-row samples: 32 a block (the largest divisor of 4,096 within
  // the 86 blocks the 6 tiles of outputs want); a scalar, 4 rows a block.
  EXPECT_EQ(block({4096, 768}, {768}, 1), 32 * 768);
  EXPECT_EQ(block({8, 4}, {}, 1), 4);
  // One sample, or broadcast along a trailing dimension: one chain.
  EXPECT_EQ(block({1, 4096, 768}, {768}, 1), 0);
  EXPECT_EQ(block({2, 3, 4}, {3, 1}, 1), 0);

  // [2, 3, 4] + [4]: blocks of 3 rows (12 outputs), each a chain from +0,
  // added in order; terms whose sum depends on the grouping.
  auto bc = MakeBroadcast(n, {2, 3, 4}, {4});
  ASSERT_TRUE(bc.ok());
  ASSERT_EQ(BinaryReductionBlock(*bc, 1), 12);
  std::vector<float> terms(24);
  for (size_t o = 0; o < terms.size(); ++o)
    terms[o] = (o / 4 % 3 == 0 ? 1e8f : 1.0f) * (o / 4 % 2 ? -1 : 1) + static_cast<float>(o % 4);
  std::vector<float> got(4), chain(4, 0.0f), want(4);
  ReduceToOperand(
      *bc, 1, [&](int64_t o, int64_t, int64_t) { return terms[o]; }, got, 12);
  for (int e = 0; e < 4; ++e) {
    float first = 0.0f, second = 0.0f;
    for (int t = 0; t < 3; ++t) first += terms[t * 4 + e];
    for (int t = 3; t < 6; ++t) second += terms[t * 4 + e];
    want[e] = first + second;
    for (int t = 0; t < 6; ++t) chain[e] += terms[t * 4 + e];
  }
  EXPECT_EQ(got, want);
  EXPECT_NE(want, chain);  // the blocks change the bits these terms give
}

TEST(Broadcast, IncompatibleShapesNameTheNode) {
  const Node n = testing::MakeNode("Mul", {"a", "b"}, {"y"});
  auto bc = MakeBroadcast(n, {2, 3}, {4});
  ASSERT_FALSE(bc.ok());
  EXPECT_EQ(bc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bc.status().message().find("Mul_0"), std::string::npos) << bc.status();
  EXPECT_NE(bc.status().message().find("[2,3]"), std::string::npos) << bc.status();
}

}  // namespace
}  // namespace easyscale::graph
