// The unary elementwise ops, one table row each: the reference formula, the
// inputs it is checked on and how close the op must come.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "graph/program.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::MakeNode;
using testing::RandomValue;
using testing::RunOp;

struct UnaryCase {
  std::string op;
  double (*reference)(double x);
  // Spreads a random element in [-1, 1) over where the op is worth checking.
  float (*spread)(float x);
  // Forward's tolerance relative to the reference; 0 asks for the float
  // nearest the reference exactly.
  double relative_tolerance;
};

const UnaryCase kCases[] = {
    {"Erf", [](double x) { return std::erf(x); }, [](float x) { return 2.5f * x; }, 4e-7},
    // Its 1 + Erf cancels for negative x: a few ulps of Erf near -1 there.
    {"Gelu", [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); },
     [](float x) { return 2.0f * x; }, 1e-5},
    {"Tanh", [](double x) { return std::tanh(x); }, [](float x) { return 4.0f * x; }, 4e-7},
    {"Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
     [](float x) { return 8.0f * x; }, 4e-7},
    {"Sqrt", [](double x) { return std::sqrt(x); }, [](float x) { return x + 1.5f; }, 0},
    // Away from the kink at 0.
    {"Relu", [](double x) { return x < 0 ? 0.0 : x; },
     [](float x) { return x + (x < 0 ? -0.05f : 0.05f); }, 0},
};

class UnaryElementwise : public ::testing::TestWithParam<UnaryCase> {
 protected:
  Node MakeOpNode(std::vector<std::string> inputs = {"x"}) const {
    return MakeNode(GetParam().op, std::move(inputs), {"y"});
  }
  Value Input(Shape shape, uint32_t seed) const {
    Value v = RandomValue(std::move(shape), seed);
    for (float& x : v.floats) x = GetParam().spread(x);
    return v;
  }
};

TEST_P(UnaryElementwise, ForwardMatchesReference) {
  const Value x = Input({3, 1, 7}, 1);
  testing::OpRun run = RunOp(MakeOpNode(), {x});
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.infos[0].shape, x.shape);
  for (size_t i = 0; i < x.floats.size(); ++i) {
    const double want = GetParam().reference(x.floats[i]);
    if (GetParam().relative_tolerance == 0) {
      EXPECT_EQ(run.outputs[0].floats[i], static_cast<float>(want)) << x.floats[i];
    } else {
      EXPECT_NEAR(run.outputs[0].floats[i], want,
                  GetParam().relative_tolerance * (1e-30 + std::fabs(want)))
          << x.floats[i];
    }
  }
}

TEST_P(UnaryElementwise, GradientMatches) {
  testing::ExpectGradientsMatch(MakeOpNode(), {Input({3, 5}, 2)}, {0});
}

TEST_P(UnaryElementwise, FactoryErrors) {
  testing::OpRun run = RunOp(MakeOpNode(), {testing::IntValue({2}, {1, 2})});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find(GetParam().op + "_0"), std::string::npos) << run.status;
  run = RunOp(MakeOpNode({"x", "z"}), {RandomValue({2}, 1), RandomValue({2}, 2)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
}

INSTANTIATE_TEST_SUITE_P(Ops, UnaryElementwise, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<UnaryCase>& info) {
                           return info.param.op;
                         });

TEST(Gelu, OnlyTheErfFormIsSupported) {
  const Node tanh_form = MakeNode("Gelu", {"x"}, {"y"}, {{"approximate", std::string("tanh")}});
  testing::OpRun run = RunOp(tanh_form, {RandomValue({2}, 1)});
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_NE(run.status.message().find("approximate"), std::string::npos) << run.status;
  run = RunOp(MakeNode("Gelu", {"x"}, {"y"}, {{"approximate", std::string("none")}}),
              {RandomValue({2}, 1)});
  EXPECT_TRUE(run.status.ok()) << run.status;
}

// GELU as PyTorch exports it, 0.5 * h * (1 + Erf(h / sqrt 2)) with h = x * w,
// through the program (which fuses the chain into one Gelu node; fusion_test
// checks it against the five ops bit for bit), against numeric differences.
TEST(Erf, GeluTrainsThroughTheProgram) {
  Graph g;
  g.opset = 17;
  auto constant = [&](const std::string& name, float v) {
    ConstantTensor c;
    c.shape = {};
    c.floats = {v};
    g.initializers[name] = c;
    g.constants.insert(name);
    g.values[name] = {DType::kFloat32, {}};
  };
  constant("sqrt2", 1.41421356f);
  constant("one", 1.0f);
  constant("half", 0.5f);
  const Value w0 = RandomValue({5}, 11);
  g.initializers["w"] = testing::ToConstant(w0);
  g.inputs = {"x"};
  g.outputs = {"loss"};
  for (const char* name : {"x", "h", "d", "e", "p", "m", "y"}) {
    g.values[name] = {DType::kFloat32, {2, 5}};
  }
  g.values["w"] = {DType::kFloat32, {5}};
  g.values["loss"] = {DType::kFloat32, {}};
  g.nodes = {MakeNode("Mul", {"x", "w"}, {"h"}),
             MakeNode("Div", {"h", "sqrt2"}, {"d"}),
             MakeNode("Erf", {"d"}, {"e"}),
             MakeNode("Add", {"e", "one"}, {"p"}),
             MakeNode("Mul", {"h", "p"}, {"m"}),
             MakeNode("Mul", {"m", "half"}, {"y"}),
             MakeNode("ReduceMean", {"y"}, {"loss"}, {{"keepdims", int64_t{0}}})};
  auto program = Program::Create(g);
  ASSERT_TRUE(program.ok()) << program.status();
  Program& p = **program;
  ASSERT_EQ(p.parameters(), std::vector<std::string>{"w"});
  p.Input(0) = RandomValue({2, 5}, 12);
  for (float& f : p.Input(0).floats) f *= 3.0f;
  RunContext ctx;
  uint64_t counter = 0;
  ctx.dropout_counter = &counter;
  auto loss = [&]() {
    p.Forward(ctx);
    return static_cast<double>(p.Output(0).floats[0]);
  };
  loss();
  Value seed;
  seed.Reset(DType::kFloat32, {});
  seed.floats[0] = 1.0f;
  p.Backward(ctx, 0, seed);
  const std::vector<float> grad = p.Gradient("w").floats;
  for (size_t e = 0; e < grad.size(); ++e) {
    const float saved = p.Initializer("w").floats[e];
    p.Initializer("w").floats[e] = saved + 1e-2f;
    const double plus = loss();
    p.Initializer("w").floats[e] = saved - 1e-2f;
    const double minus = loss();
    p.Initializer("w").floats[e] = saved;
    const double numeric = (plus - minus) / 2e-2;
    EXPECT_NEAR(grad[e], numeric, 2e-2 * (1 + std::fabs(numeric))) << e;
  }
}

}  // namespace
}  // namespace easyscale::graph
