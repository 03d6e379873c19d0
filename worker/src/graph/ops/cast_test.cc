#include <limits>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::IntValue;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

Node CastTo(int64_t to) { return MakeNode("Cast", {"x"}, {"y"}, {{"to", to}}); }

Value Floats(std::vector<float> f) {
  Value v;
  v.Reset(DType::kFloat32, {static_cast<int64_t>(f.size())});
  v.floats = std::move(f);
  return v;
}

TEST(CastTest, FloatToInt64TruncatesTowardZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  testing::OpRun run =
      RunOp(CastTo(7), {Floats({1.7f, -1.7f, 0.5f, -0.0f, 3.0f, nan, 1e30f, -1e30f})});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].dtype, DType::kInt64);
  EXPECT_EQ(run.outputs[0].ints,
            (std::vector<int64_t>{1, -1, 0, 0, 3, 0, std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min()}));
  EXPECT_FALSE(run.op->HasGradient(0));
}

TEST(CastTest, IntAndBoolConversions) {
  testing::OpRun run = RunOp(CastTo(1), {IntValue({3}, {-2, 0, 16777217})});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].floats, (std::vector<float>{-2.0f, 0.0f, 16777216.0f}));
  run = RunOp(CastTo(9), {IntValue({3}, {-2, 0, 5})});
  EXPECT_EQ(run.infos[0].dtype, DType::kBool);
  EXPECT_EQ(run.outputs[0].ints, (std::vector<int64_t>{1, 0, 1}));
  run = RunOp(CastTo(9), {Floats({0.0f, -0.0f, 0.25f})});
  EXPECT_EQ(run.outputs[0].ints, (std::vector<int64_t>{0, 0, 1}));
  Value b;
  b.Reset(DType::kBool, {2});
  b.ints = {1, 0};
  run = RunOp(CastTo(1), {b});
  EXPECT_EQ(run.outputs[0].floats, (std::vector<float>{1.0f, 0.0f}));
  run = RunOp(CastTo(7), {b});
  EXPECT_EQ(run.outputs[0].ints, (std::vector<int64_t>{1, 0}));
}

TEST(CastTest, FloatToFloatGradient) {
  ExpectGradientsMatch(CastTo(1), {RandomValue({2, 3}, 1)}, {0});
}

TEST(CastTest, Errors) {
  testing::OpRun run = RunOp(CastTo(11), {RandomValue({2}, 1)});
  EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
  EXPECT_NE(run.status.message().find("attribute to 11"), std::string::npos) << run.status;
  EXPECT_NE(run.status.message().find("Cast_0"), std::string::npos) << run.status;
  run = RunOp(MakeNode("Cast", {"x"}, {"y"}), {RandomValue({2}, 1)});
  EXPECT_NE(run.status.message().find("attribute to is missing"), std::string::npos) << run.status;
}

}  // namespace
}  // namespace easyscale::graph
