#include <gtest/gtest.h>

#include <vector>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

const Node kPool = MakeNode("GlobalAveragePool", {"x"}, {"y"});

TEST(GlobalAveragePoolTest, MeanPerPlaneInRowMajorOrder) {
  Value x = RandomValue({2, 3, 5, 3}, 1);
  testing::OpRun run = RunOp(kPool, {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 3, 1, 1}));
  for (int64_t pl = 0; pl < 6; ++pl) {
    float sum = 0.0f;
    for (int64_t p = 0; p < 15; ++p) sum += x.floats[pl * 15 + p];
    EXPECT_EQ(run.outputs[0].floats[pl], sum / 15.0f);
  }
  run = RunOp(kPool, {RandomValue({2, 3, 4}, 2)});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 3, 1}));
}

TEST(GlobalAveragePoolTest, Gradients) {
  ExpectGradientsMatch(kPool, {RandomValue({2, 3, 3, 4}, 1)}, {0});
}

TEST(GlobalAveragePoolTest, FactoryErrors) {
  testing::OpRun run = RunOp(kPool, {RandomValue({2, 3}, 1)});
  EXPECT_FALSE(run.status.ok());
  EXPECT_NE(run.status.message().find("GlobalAveragePool_0"), std::string::npos) << run.status;
  EXPECT_NE(run.status.message().find("X"), std::string::npos) << run.status;
  Value ints = testing::IntValue({1, 1, 1}, {1});
  run = RunOp(kPool, {ints});
  EXPECT_FALSE(run.status.ok());
  EXPECT_NE(run.status.message().find("float32"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
