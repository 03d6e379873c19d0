#include <gtest/gtest.h>

#include <vector>

#include "easyscale/worker/detmath.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

Node GemmNode(bool with_c, int64_t trans_a, int64_t trans_b, float alpha, float beta) {
  return MakeNode(
      "Gemm", with_c ? std::vector<std::string>{"a", "b", "c"} : std::vector<std::string>{"a", "b"},
      {"y"}, {{"transA", trans_a}, {"transB", trans_b}, {"alpha", alpha}, {"beta", beta}});
}

// Y by the documented order, C read at c_index(i, j).
template <typename CIndex>
std::vector<float> Reference(const Value& a, const Value& b, const Value* c, bool ta, bool tb,
                             float alpha, float beta, int64_t m, int64_t n, int64_t k,
                             CIndex c_index) {
  std::vector<float> y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float p = 0.0f;
      for (int64_t q = 0; q < k; ++q) {
        p = detmath::Fma(a.floats[ta ? q * m + i : i * k + q], b.floats[tb ? j * k + q : q * n + j],
                         p);
      }
      y[i * n + j] = c != nullptr ? alpha * p + beta * c->floats[c_index(i, j)] : alpha * p;
    }
  }
  return y;
}

TEST(GemmTest, ForwardMatchesTheDocumentedOrder) {
  const int64_t m = 3, n = 5, k = 7;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      Value a = RandomValue(ta ? Shape{k, m} : Shape{m, k}, 1);
      Value b = RandomValue(tb ? Shape{n, k} : Shape{k, n}, 2);
      Value c = RandomValue({1, n}, 3);
      testing::OpRun run = RunOp(GemmNode(true, ta, tb, 0.25f, 0.35f), {a, b, c});
      ASSERT_TRUE(run.status.ok()) << run.status;
      EXPECT_EQ(run.infos[0].shape, (Shape{m, n}));
      EXPECT_EQ(run.outputs[0].floats, Reference(a, b, &c, ta, tb, 0.25f, 0.35f, m, n, k,
                                                 [](int64_t, int64_t j) { return j; }));
    }
  }
}

TEST(GemmTest, BiasShapesBroadcast) {
  const int64_t m = 3, n = 4, k = 2;
  Value a = RandomValue({m, k}, 1), b = RandomValue({k, n}, 2);
  struct Case {
    Shape shape;
    int64_t (*index)(int64_t, int64_t);
  };
  const Case cases[] = {
      {{}, [](int64_t, int64_t) -> int64_t { return 0; }},
      {{1}, [](int64_t, int64_t) -> int64_t { return 0; }},
      {{n}, [](int64_t, int64_t j) -> int64_t { return j; }},
      {{m, 1}, [](int64_t i, int64_t) -> int64_t { return i; }},
      {{m, n}, [](int64_t i, int64_t j) -> int64_t { return i * 4 + j; }},
  };
  for (const Case& cs : cases) {
    Value c = RandomValue(cs.shape, 3);
    testing::OpRun run = RunOp(GemmNode(true, 0, 0, 1.0f, 1.0f), {a, b, c});
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_EQ(run.outputs[0].floats,
              Reference(a, b, &c, false, false, 1.0f, 1.0f, m, n, k, cs.index));
    ExpectGradientsMatch(GemmNode(true, 0, 1, 0.5f, 1.5f), {a, RandomValue({n, k}, 4), c},
                         {0, 1, 2});
  }
  testing::OpRun run = RunOp(GemmNode(false, 0, 0, 1.0f, 1.0f), {a, b});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].floats, Reference(a, b, nullptr, false, false, 1.0f, 1.0f, m, n, k,
                                             [](int64_t, int64_t) -> int64_t { return 0; }));
}

TEST(GemmTest, Gradients) {
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      ExpectGradientsMatch(GemmNode(true, ta, tb, 0.7f, -1.3f),
                           {RandomValue(ta ? Shape{5, 3} : Shape{3, 5}, 1),
                            RandomValue(tb ? Shape{4, 5} : Shape{5, 4}, 2), RandomValue({4}, 3)},
                           {0, 1, 2});
    }
  }
}

TEST(GemmTest, FactoryErrors) {
  auto error = [](Node n, std::vector<Value> in) {
    testing::OpRun run = RunOp(n, in);
    EXPECT_FALSE(run.status.ok());
    EXPECT_NE(run.status.message().find("Gemm_0"), std::string::npos) << run.status;
    return std::string(run.status.message());
  };
  const Value a = RandomValue({3, 5}, 1), b = RandomValue({5, 4}, 2);
  EXPECT_NE(error(GemmNode(false, 1, 0, 1, 1), {a, b}).find("K"), std::string::npos);
  EXPECT_NE(error(GemmNode(false, 2, 0, 1, 1), {a, b}).find("transA"), std::string::npos);
  EXPECT_NE(error(GemmNode(true, 0, 0, 1, 1), {a, b, RandomValue({2, 4}, 3)}).find("C"),
            std::string::npos);
  EXPECT_NE(error(GemmNode(false, 0, 0, 1, 1), {RandomValue({3, 5, 1}, 1), b}).find("A"),
            std::string::npos);
  Node n = GemmNode(false, 0, 0, 1, 1);
  n.attributes["alpha"] = int64_t{1};
  EXPECT_NE(error(n, {a, b}).find("alpha"), std::string::npos);
}

}  // namespace
}  // namespace easyscale::graph
