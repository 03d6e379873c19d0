#include "easyscale/worker/kernel_formulas.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;
using testing::ScalarValue;

Value Bool(bool b) {
  Value v;
  v.Reset(DType::kBool, {});
  v.ints = {b ? 1 : 0};
  return v;
}

Node DropoutNode() { return MakeNode("Dropout", {"x", "ratio", "training_mode"}, {"y", "mask"}); }

TEST(DropoutTest, TrainingUsesTheEstStreamAndAdvancesItsCounter) {
  const Value x = RandomValue({2, 5}, 1), ratio = ScalarValue(0.3f), on = Bool(true);
  testing::OpRun run = RunOp(DropoutNode(), {x, ratio, on}, {1, 2});
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.infos[1].dtype, DType::kBool);

  RunContext ctx;
  ctx.dropout_key = {123, 456};
  uint64_t counter = 7;
  ctx.dropout_counter = &counter;
  std::vector<Value> outs(2);
  outs[0].Reset(DType::kFloat32, {2, 5});
  outs[1].Reset(DType::kBool, {2, 5});
  run.op->Forward(ctx, {&x, &ratio, &on}, {&outs[0], &outs[1]});
  EXPECT_EQ(counter, 7u + 3u);  // ceil(10 / 4)

  int kept = 0;
  for (size_t i = 0; i < 10; ++i) {
    uint32_t bits[4];
    Philox4x32(ctx.dropout_key, 7 + i / 4, 0, bits);
    const bool keeps = formulas::DropoutKeeps(bits[i % 4], 0.3f);
    EXPECT_EQ(outs[0].floats[i], x.floats[i] * (keeps ? 1.0f / (1.0f - 0.3f) : 0.0f)) << i;
    EXPECT_EQ(outs[1].ints[i], keeps ? 1 : 0) << i;
    kept += keeps;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 10);
}

TEST(DropoutTest, IdentityOutsideTraining) {
  const Value x = RandomValue({7}, 2);
  for (const auto& [training, mode] : {std::pair{false, true}, {true, false}}) {
    testing::OpRun run = RunOp(DropoutNode(), {x, ScalarValue(0.5f), Bool(mode)}, {1, 2}, training);
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_EQ(run.outputs[0].floats, x.floats);
    EXPECT_EQ(run.outputs[1].ints, std::vector<int64_t>(7, 1));
  }
  // No training_mode input: ONNX's default, inference.
  testing::OpRun run = RunOp(MakeNode("Dropout", {"x"}, {"y"}), {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].floats, x.floats);
  // Before opset 12: ratio is an attribute and RunContext.training decides.
  run = RunOp(MakeNode("Dropout", {"x"}, {"y"}, {{"ratio", 0.2f}}), {x}, {}, false, 11);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.outputs[0].floats, x.floats);
}

TEST(DropoutTest, Gradient) {
  ExpectGradientsMatch(DropoutNode(), {RandomValue({3, 4}, 3), ScalarValue(0.4f), Bool(true)}, {0},
                       {1, 2});
}

TEST(DropoutTest, Errors) {
  const Value x = RandomValue({4}, 1);
  auto message = [&](std::vector<Value> config, std::vector<size_t> constants) {
    std::vector<Value> in = {x};
    for (Value& v : config) in.push_back(std::move(v));
    testing::OpRun run = RunOp(DropoutNode(), in, constants);
    EXPECT_TRUE(absl::IsInvalidArgument(run.status)) << run.status;
    EXPECT_NE(run.status.message().find("Dropout_0"), std::string::npos) << run.status;
    return std::string(run.status.message());
  };
  EXPECT_NE(message({ScalarValue(0.5f), Bool(true)}, {2}).find("ratio input is not known"),
            std::string::npos);
  EXPECT_NE(message({ScalarValue(0.5f), Bool(true)}, {1}).find("training_mode input is not known"),
            std::string::npos);
  EXPECT_NE(message({ScalarValue(1.0f), Bool(true)}, {1, 2}).find("not in [0, 1)"),
            std::string::npos);
  EXPECT_NE(message({ScalarValue(0.5f), ScalarValue(1.0f)}, {1, 2}).find("one bool"),
            std::string::npos);
}

}  // namespace
}  // namespace easyscale::graph
