// AveragePool and MaxPool: their factories share the window geometry
// (window.h), their tests the ramp inputs and the run and error helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "graph/ops/pool_formulas.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;
using Ints = std::vector<int64_t>;
using Attributes = std::map<std::string, Attribute>;

// 1, 2, ..., n in row-major order.
Value Ramp(Shape shape) {
  Value v;
  v.Reset(DType::kFloat32, std::move(shape));
  std::iota(v.floats.begin(), v.floats.end(), 1.0f);
  return v;
}

// Distinct values 0.1 apart, shuffled: no tie comes within a finite-difference step.
Value Spread(Shape shape, uint32_t seed) {
  Value v = Ramp(std::move(shape));
  std::shuffle(v.floats.begin(), v.floats.end(), std::mt19937(seed));
  for (float& f : v.floats) f *= 0.1f;
  return v;
}

Node PoolNode(const std::string& op, Attributes attrs, std::vector<std::string> outputs = {"y"}) {
  return MakeNode(op, {"x"}, std::move(outputs), std::move(attrs));
}

// The output of pool `op` on x, which must succeed.
std::vector<float> Pool(const std::string& op, Attributes attrs, const Value& x) {
  testing::OpRun run = RunOp(PoolNode(op, std::move(attrs)), {x});
  EXPECT_TRUE(run.status.ok()) << run.status;
  return run.outputs.empty() ? std::vector<float>{} : run.outputs[0].floats;
}

// The error of pool node `n` on a ramp of `x`, which must name the node.
std::string PoolError(const Node& n, Shape x) {
  testing::OpRun run = RunOp(n, {Ramp(std::move(x))});
  EXPECT_FALSE(run.status.ok());
  EXPECT_NE(run.status.message().find(n.op + "_0"), std::string::npos) << run.status;
  return std::string(run.status.message());
}

// The device backward passes' visit order: every output whose window holds
// the element, row-major, against a scan of all outputs' taps.
TEST(PoolFormulasTest, ForEachOutputReadingVisitsExactlyTheWindowsHoldingTheElement) {
  for (const int stride : {1, 2, 3}) {
    for (const int dilation : {1, 2, 3}) {
      for (const int pad : {0, 1, 2}) {
        // 3x2 taps over an 11x9 image.
        cpu::ConvGeometry g{1, 11, 9, 3, 2, stride, stride, pad, pad, dilation, dilation, 0, 0};
        g.OH = (g.H + 2 * pad - (g.KH - 1) * dilation - 1) / stride + 1;
        g.OW = (g.W + 2 * pad - (g.KW - 1) * dilation - 1) / stride + 1;
        for (int iy = 0; iy < g.H; ++iy) {
          for (int ix = 0; ix < g.W; ++ix) {
            std::vector<std::pair<int, int>> expected, visited;
            for (int oy = 0; oy < g.OH; ++oy) {
              for (int ox = 0; ox < g.OW; ++ox) {
                bool reads = false;
                for (int ky = 0; ky < g.KH; ++ky) {
                  for (int kx = 0; kx < g.KW; ++kx) {
                    reads |= oy * stride - pad + ky * dilation == iy &&
                             ox * stride - pad + kx * dilation == ix;
                  }
                }
                if (reads) expected.emplace_back(oy, ox);
              }
            }
            ForEachOutputReading(g, iy, ix, [&](int oy, int ox) { visited.emplace_back(oy, ox); });
            ASSERT_EQ(visited, expected) << "stride " << stride << " dilation " << dilation
                                         << " pad " << pad << " at " << iy << "," << ix;
          }
        }
      }
    }
  }
}

TEST(AveragePoolTest, OnnxCases) {
  EXPECT_EQ(Pool("AveragePool",
                 {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
                 Ramp({1, 1, 4, 4})),
            (std::vector<float>{6, 7.5f, 12, 13.5f}));
  EXPECT_EQ(Pool("AveragePool",
                 {{"kernel_shape", Ints{3, 3}},
                  {"strides", Ints{2, 2}},
                  {"auto_pad", std::string("SAME_UPPER")}},
                 Ramp({1, 1, 5, 5})),
            (std::vector<float>{4, 5.5f, 7, 11.5f, 13, 14.5f, 19, 20.5f, 22}));
  // Padding counted or not: the corner window holds 1+2+3+6+7+8+11+12+13 = 63.
  std::vector<float> y =
      Pool("AveragePool", {{"kernel_shape", Ints{5, 5}}, {"pads", Ints{2, 2, 2, 2}}},
           Ramp({1, 1, 5, 5}));
  ASSERT_EQ(y.size(), 25u);
  EXPECT_EQ(y[0], 63.0f / 9.0f);
  y = Pool(
      "AveragePool",
      {{"kernel_shape", Ints{5, 5}}, {"pads", Ints{2, 2, 2, 2}}, {"count_include_pad", int64_t{1}}},
      Ramp({1, 1, 5, 5}));
  EXPECT_EQ(y[0], 63.0f / 25.0f);
  EXPECT_EQ(Pool("AveragePool", {{"kernel_shape", Ints{2}}}, Ramp({1, 1, 4})),
            (std::vector<float>{1.5f, 2.5f, 3.5f}));
}

TEST(AveragePoolTest, SumsInTapOrder) {
  Value x = RandomValue({2, 3, 6, 5}, 1);
  std::vector<float> y =
      Pool("AveragePool",
           {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 0, 1}}}, x);
  ASSERT_EQ(y.size(), 2u * 3 * 3 * 5);
  for (int64_t pl = 0; pl < 6; ++pl) {
    for (int64_t oy = 0; oy < 3; ++oy) {
      for (int64_t ox = 0; ox < 5; ++ox) {
        float sum = 0.0f;
        int n = 0;
        for (int64_t ky = 0; ky < 3; ++ky) {
          for (int64_t kx = 0; kx < 2; ++kx) {
            const int64_t iy = oy * 2 - 1 + ky, ix = ox + kx;
            if (iy < 0 || iy >= 6 || ix >= 5) continue;
            sum += x.floats[(pl * 6 + iy) * 5 + ix];
            ++n;
          }
        }
        EXPECT_EQ(y[(pl * 3 + oy) * 5 + ox], sum / static_cast<float>(n));
      }
    }
  }
}

TEST(AveragePoolTest, Gradients) {
  for (int64_t include : {0, 1}) {
    ExpectGradientsMatch(MakeNode("AveragePool", {"x"}, {"y"},
                                  {{"kernel_shape", Ints{3, 3}},
                                   {"strides", Ints{2, 2}},
                                   {"pads", Ints{1, 1, 1, 1}},
                                   {"count_include_pad", include}}),
                         {RandomValue({2, 2, 5, 6}, 1)}, {0});
    ExpectGradientsMatch(MakeNode("AveragePool", {"x"}, {"y"},
                                  {{"kernel_shape", Ints{2, 2}},
                                   {"strides", Ints{2, 2}},
                                   {"ceil_mode", int64_t{1}},
                                   {"count_include_pad", include}}),
                         {RandomValue({1, 2, 5, 5}, 2)}, {0});
  }
}

TEST(AveragePoolTest, FactoryErrors) {
  auto error = [](Attributes attrs, Shape x) {
    return PoolError(PoolNode("AveragePool", std::move(attrs)), std::move(x));
  };
  EXPECT_NE(error({}, {1, 1, 4, 4}).find("kernel_shape"), std::string::npos);
  EXPECT_NE(error({{"kernel_shape", Ints{2, 2}}, {"count_include_pad", int64_t{2}}}, {1, 1, 4, 4})
                .find("count_include_pad"),
            std::string::npos);
  EXPECT_NE(error({{"kernel_shape", Ints{5, 5}}}, {1, 1, 4, 4}).find("kernel"), std::string::npos);
  EXPECT_NE(
      error({{"kernel_shape", Ints{2, 2}}, {"pads", Ints{-1, 0, 0, 0}}}, {1, 1, 4, 4}).find("pads"),
      std::string::npos);
}

TEST(MaxPoolTest, OnnxCases) {
  const Value x = Ramp({1, 1, 4, 4});
  EXPECT_EQ(
      Pool("MaxPool",
           {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}, x),
      (std::vector<float>{11, 12, 15, 16}));
  EXPECT_EQ(Pool("MaxPool", {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}, x),
            (std::vector<float>{11, 12, 15, 16}));
  EXPECT_EQ(Pool("MaxPool",
                 {{"kernel_shape", Ints{3, 3}},
                  {"strides", Ints{2, 2}},
                  {"auto_pad", std::string("SAME_UPPER")}},
                 Ramp({1, 1, 5, 5})),
            (std::vector<float>{7, 9, 10, 17, 19, 20, 22, 24, 25}));
  EXPECT_EQ(Pool("MaxPool", {{"kernel_shape", Ints{2}}}, Ramp({1, 2, 4})),
            (std::vector<float>{2, 3, 4, 6, 7, 8}));
}

TEST(MaxPoolTest, FirstMaximumWinsAndGetsTheGradient) {
  Value x;
  x.Reset(DType::kFloat32, {1, 1, 2, 3});
  x.floats = {5, 1, 5, 5, 2, 0};
  Node n = MakeNode("MaxPool", {"x"}, {"y"}, {{"kernel_shape", Ints{2, 2}}});
  testing::OpRun run = RunOp(n, {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].floats, (std::vector<float>{5, 5}));
  Value dy, dx;
  dy.Reset(DType::kFloat32, {1, 1, 1, 2});
  dy.floats = {1, 10};
  dx.Reset(DType::kFloat32, x.shape);
  RunContext ctx;
  run.op->Backward(ctx, {&x}, {&run.outputs[0]}, {&dy}, {&dx});
  // Window 0's first 5 is x[0]; window 1's is x[2]; overlapping windows add.
  EXPECT_EQ(dx.floats, (std::vector<float>{1, 0, 10, 0, 0, 0}));
}

TEST(MaxPoolTest, Gradients) {
  ExpectGradientsMatch(
      MakeNode("MaxPool", {"x"}, {"y"},
               {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
      {Spread({2, 2, 5, 5}, 1)}, {0});
  ExpectGradientsMatch(MakeNode("MaxPool", {"x"}, {"y"},
                                {{"kernel_shape", Ints{2, 3}},
                                 {"strides", Ints{1, 2}},
                                 {"ceil_mode", int64_t{1}},
                                 {"dilations", Ints{2, 1}}}),
                       {Spread({1, 2, 6, 7}, 2)}, {0});
}

TEST(MaxPoolTest, FactoryErrors) {
  auto error = [](Attributes attrs, Shape x, std::vector<std::string> outputs = {"y"}) {
    return PoolError(PoolNode("MaxPool", std::move(attrs), std::move(outputs)), std::move(x));
  };
  EXPECT_NE(error({{"kernel_shape", Ints{2, 2}}}, {1, 1, 4, 4}, {"y", "i"}).find("Indices"),
            std::string::npos);
  EXPECT_NE(error({}, {1, 1, 4, 4}).find("kernel_shape"), std::string::npos);
  EXPECT_NE(error({{"kernel_shape", Ints{2}}}, {1, 1, 4, 4}).find("kernel_shape"),
            std::string::npos);
  EXPECT_NE(error({{"kernel_shape", Ints{2, 2}}, {"ceil_mode", int64_t{3}}}, {1, 1, 4, 4})
                .find("ceil_mode"),
            std::string::npos);
  EXPECT_NE(error({{"kernel_shape", Ints{2, 2, 2}}}, {1, 1, 4, 4, 4}).find("X"), std::string::npos);
  EXPECT_NE(error({{"kernel_shape", Ints{2, 2}},
                   {"pads", Ints{1, 1, 1, 1}},
                   {"auto_pad", std::string("VALID")}},
                  {1, 1, 4, 4})
                .find("auto_pad"),
            std::string::npos);
}

}  // namespace
}  // namespace easyscale::graph
