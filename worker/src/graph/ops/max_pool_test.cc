#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::MakeNode;
using testing::RunOp;
using Ints = std::vector<int64_t>;

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

std::vector<float> Pool(const Node& n, const Value& x) {
  testing::OpRun run = RunOp(n, {x});
  EXPECT_TRUE(run.status.ok()) << run.status;
  return run.outputs.empty() ? std::vector<float>{} : run.outputs[0].floats;
}

TEST(MaxPoolTest, OnnxCases) {
  const Value x = Ramp({1, 1, 4, 4});
  EXPECT_EQ(
      Pool(MakeNode(
               "MaxPool", {"x"}, {"y"},
               {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}),
           x),
      (std::vector<float>{11, 12, 15, 16}));
  EXPECT_EQ(Pool(MakeNode("MaxPool", {"x"}, {"y"},
                          {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}),
                 x),
            (std::vector<float>{11, 12, 15, 16}));
  EXPECT_EQ(Pool(MakeNode("MaxPool", {"x"}, {"y"},
                          {{"kernel_shape", Ints{3, 3}},
                           {"strides", Ints{2, 2}},
                           {"auto_pad", std::string("SAME_UPPER")}}),
                 Ramp({1, 1, 5, 5})),
            (std::vector<float>{7, 9, 10, 17, 19, 20, 22, 24, 25}));
  EXPECT_EQ(Pool(MakeNode("MaxPool", {"x"}, {"y"}, {{"kernel_shape", Ints{2}}}), Ramp({1, 2, 4})),
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
  auto error = [](Node n, Shape x) {
    testing::OpRun run = RunOp(n, {Ramp(x)});
    EXPECT_FALSE(run.status.ok());
    EXPECT_NE(run.status.message().find("MaxPool_0"), std::string::npos) << run.status;
    return std::string(run.status.message());
  };
  EXPECT_NE(
      error(MakeNode("MaxPool", {"x"}, {"y", "i"}, {{"kernel_shape", Ints{2, 2}}}), {1, 1, 4, 4})
          .find("Indices"),
      std::string::npos);
  EXPECT_NE(error(MakeNode("MaxPool", {"x"}, {"y"}), {1, 1, 4, 4}).find("kernel_shape"),
            std::string::npos);
  EXPECT_NE(error(MakeNode("MaxPool", {"x"}, {"y"}, {{"kernel_shape", Ints{2}}}), {1, 1, 4, 4})
                .find("kernel_shape"),
            std::string::npos);
  EXPECT_NE(error(MakeNode("MaxPool", {"x"}, {"y"},
                           {{"kernel_shape", Ints{2, 2}}, {"ceil_mode", int64_t{3}}}),
                  {1, 1, 4, 4})
                .find("ceil_mode"),
            std::string::npos);
  EXPECT_NE(
      error(MakeNode("MaxPool", {"x"}, {"y"}, {{"kernel_shape", Ints{2, 2, 2}}}), {1, 1, 4, 4, 4})
          .find("X"),
      std::string::npos);
  EXPECT_NE(error(MakeNode("MaxPool", {"x"}, {"y"},
                           {{"kernel_shape", Ints{2, 2}},
                            {"pads", Ints{1, 1, 1, 1}},
                            {"auto_pad", std::string("VALID")}}),
                  {1, 1, 4, 4})
                .find("auto_pad"),
            std::string::npos);
}

}  // namespace
}  // namespace easyscale::graph
