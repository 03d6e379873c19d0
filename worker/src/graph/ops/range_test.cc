#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::IntValue;
using testing::MakeNode;
using testing::RunOp;

Node RangeNode() { return MakeNode("Range", {"start", "limit", "delta"}, {"y"}); }

Value Float(float f) {
  Value v;
  v.Reset(DType::kFloat32, {});
  v.floats = {f};
  return v;
}

std::vector<int64_t> IntRange(int64_t start, int64_t limit, int64_t delta) {
  testing::OpRun run =
      RunOp(RangeNode(), {IntValue({}, {start}), IntValue({}, {limit}), IntValue({}, {delta})},
            {0, 1, 2});
  EXPECT_TRUE(run.status.ok()) << run.status;
  if (!run.status.ok()) return {};
  EXPECT_EQ(run.infos[0].shape, (Shape{static_cast<int64_t>(run.outputs[0].ints.size())}));
  return run.outputs[0].ints;
}

TEST(RangeTest, Int64) {
  EXPECT_EQ(IntRange(0, 5, 1), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(IntRange(1, 8, 3), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(IntRange(10, 4, -3), (std::vector<int64_t>{10, 7}));
  EXPECT_EQ(IntRange(10, 3, -3), (std::vector<int64_t>{10, 7, 4}));
  EXPECT_EQ(IntRange(5, 0, 1), (std::vector<int64_t>{}));
}

TEST(RangeTest, Float) {
  testing::OpRun run = RunOp(RangeNode(), {Float(1.0f), Float(2.0f), Float(0.25f)}, {0, 1, 2});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].floats, (std::vector<float>{1.0f, 1.25f, 1.5f, 1.75f}));
  EXPECT_FALSE(run.op->HasGradient(0));
}

TEST(RangeTest, Errors) {
  testing::OpRun run =
      RunOp(RangeNode(), {IntValue({}, {0}), IntValue({}, {3}), IntValue({}, {1})}, {0, 2});
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
  EXPECT_NE(run.status.message().find("Range_0"), std::string::npos) << run.status;
  EXPECT_NE(run.status.message().find("limit input is not known"), std::string::npos);
  run = RunOp(RangeNode(), {IntValue({}, {0}), IntValue({}, {3}), IntValue({}, {0})}, {0, 1, 2});
  EXPECT_NE(run.status.message().find("delta input is 0"), std::string::npos) << run.status;
  run = RunOp(RangeNode(), {IntValue({}, {0}), Float(3.0f), IntValue({}, {1})}, {0, 1, 2});
  EXPECT_NE(run.status.message().find("limit input must be"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
