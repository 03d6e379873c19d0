#include <gtest/gtest.h>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

TEST(ReduceMean, AxesKeepdimsAndAll) {
  const Value x = RandomValue({2, 3, 4}, 1);
  auto at = [&](int i, int j, int k) { return x.floats[(i * 3 + j) * 4 + k]; };
  testing::OpRun run =
      RunOp(MakeNode("ReduceMean", {"x"}, {"y"}, {{"axes", std::vector<int64_t>{0, -1}}}), {x}, {},
            true, 13);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{1, 3, 1}));
  for (int j = 0; j < 3; ++j) {
    float sum = 0.0f;  // the documented order: ascending input index
    for (int i = 0; i < 2; ++i) {
      for (int k = 0; k < 4; ++k) sum += at(i, j, k);
    }
    EXPECT_EQ(run.outputs[0].floats[j], sum / 8.0f);
  }
  // Opset 18: axes as a constant input; keepdims 0.
  run = RunOp(MakeNode("ReduceMean", {"x", "axes"}, {"y"}, {{"keepdims", int64_t{0}}}),
              {x, IntValue({1}, {1})}, {1}, true, 18);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, (Shape{2, 4}));
  EXPECT_FLOAT_EQ(run.outputs[0].floats[5], (at(1, 0, 1) + at(1, 1, 1) + at(1, 2, 1)) / 3.0f);
  // No axes: everything, or nothing with noop_with_empty_axes.
  run = RunOp(MakeNode("ReduceMean", {"x"}, {"y"}), {x}, {}, true, 13);
  EXPECT_EQ(run.infos[0].shape, (Shape{1, 1, 1}));
  run = RunOp(MakeNode("ReduceMean", {"x"}, {"y"}, {{"noop_with_empty_axes", int64_t{1}}}), {x}, {},
              true, 18);
  EXPECT_EQ(run.outputs[0].floats, x.floats);
}

TEST(ReduceMean, GradientsMatch) {
  testing::ExpectGradientsMatch(
      MakeNode("ReduceMean", {"x"}, {"y"}, {{"axes", std::vector<int64_t>{1}}}),
      {RandomValue({3, 5, 2}, 2)}, {0});
  testing::ExpectGradientsMatch(
      MakeNode("ReduceMean", {"x"}, {"y"},
               {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{0}}}),
      {RandomValue({3, 5, 2}, 3)}, {0});
}

TEST(ReduceMean, FactoryErrors) {
  const Value x = RandomValue({2, 3}, 1);
  testing::OpRun run = RunOp(
      MakeNode("ReduceMean", {"x"}, {"y"}, {{"axes", std::vector<int64_t>{2}}}), {x}, {}, true, 13);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  run = RunOp(MakeNode("ReduceMean", {"x"}, {"y"}, {{"axes", std::vector<int64_t>{1, -1}}}), {x},
              {}, true, 13);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  run = RunOp(MakeNode("ReduceMean", {"x", "axes"}, {"y"}), {x, IntValue({1}, {1})}, {}, true, 18);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find("not a constant"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
