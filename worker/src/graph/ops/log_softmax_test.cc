#include <gtest/gtest.h>

#include <cmath>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

// softmax_test.cc covers both forms; here LogSoftmax against exp's inverse.
TEST(LogSoftmax, IsTheLogOfSoftmax) {
  const Value x = testing::RandomValue({3, 4}, 5);
  testing::OpRun soft = testing::RunOp(testing::MakeNode("Softmax", {"x"}, {"y"}), {x});
  testing::OpRun log = testing::RunOp(testing::MakeNode("LogSoftmax", {"x"}, {"y"}), {x});
  ASSERT_TRUE(log.status.ok()) << log.status;
  for (size_t i = 0; i < x.floats.size(); ++i) {
    EXPECT_NEAR(std::exp(log.outputs[0].floats[i]), soft.outputs[0].floats[i], 1e-6);
  }
}

}  // namespace
}  // namespace easyscale::graph
