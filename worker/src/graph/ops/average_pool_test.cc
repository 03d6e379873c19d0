#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;
using Ints = std::vector<int64_t>;

Value Ramp(Shape shape) {
  Value v;
  v.Reset(DType::kFloat32, std::move(shape));
  std::iota(v.floats.begin(), v.floats.end(), 1.0f);
  return v;
}

std::vector<float> Pool(std::map<std::string, Attribute> attrs, const Value& x) {
  testing::OpRun run = RunOp(MakeNode("AveragePool", {"x"}, {"y"}, std::move(attrs)), {x});
  EXPECT_TRUE(run.status.ok()) << run.status;
  return run.outputs.empty() ? std::vector<float>{} : run.outputs[0].floats;
}

TEST(AveragePoolTest, OnnxCases) {
  EXPECT_EQ(Pool({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
                 Ramp({1, 1, 4, 4})),
            (std::vector<float>{6, 7.5f, 12, 13.5f}));
  EXPECT_EQ(Pool({{"kernel_shape", Ints{3, 3}},
                  {"strides", Ints{2, 2}},
                  {"auto_pad", std::string("SAME_UPPER")}},
                 Ramp({1, 1, 5, 5})),
            (std::vector<float>{4, 5.5f, 7, 11.5f, 13, 14.5f, 19, 20.5f, 22}));
  // Padding counted or not: the corner window holds 1+2+3+6+7+8+11+12+13 = 63.
  std::vector<float> y =
      Pool({{"kernel_shape", Ints{5, 5}}, {"pads", Ints{2, 2, 2, 2}}}, Ramp({1, 1, 5, 5}));
  ASSERT_EQ(y.size(), 25u);
  EXPECT_EQ(y[0], 63.0f / 9.0f);
  y = Pool(
      {{"kernel_shape", Ints{5, 5}}, {"pads", Ints{2, 2, 2, 2}}, {"count_include_pad", int64_t{1}}},
      Ramp({1, 1, 5, 5}));
  EXPECT_EQ(y[0], 63.0f / 25.0f);
  EXPECT_EQ(Pool({{"kernel_shape", Ints{2}}}, Ramp({1, 1, 4})),
            (std::vector<float>{1.5f, 2.5f, 3.5f}));
}

TEST(AveragePoolTest, SumsInTapOrder) {
  Value x = RandomValue({2, 3, 6, 5}, 1);
  std::vector<float> y =
      Pool({{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 0, 1}}}, x);
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
  auto error = [](std::map<std::string, Attribute> attrs, Shape x) {
    testing::OpRun run = RunOp(MakeNode("AveragePool", {"x"}, {"y"}, std::move(attrs)), {Ramp(x)});
    EXPECT_FALSE(run.status.ok());
    EXPECT_NE(run.status.message().find("AveragePool_0"), std::string::npos) << run.status;
    return std::string(run.status.message());
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

}  // namespace
}  // namespace easyscale::graph
