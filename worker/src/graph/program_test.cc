// The program: which initializers train, the reverse pass, and the one
// reduction the runtime does itself (a value read several times).
#include "graph/program.h"

#include <gtest/gtest.h>

#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::MakeNode;

ConstantTensor Floats(Shape shape, std::vector<float> v) {
  ConstantTensor c;
  c.shape = std::move(shape);
  c.floats = std::move(v);
  return c;
}

// y = (x * w) + (x * w) * k, with k a constant the loader made and `unused`
// an initializer nothing reads.
Graph TwoReaders() {
  Graph g;
  g.opset = 17;
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.nodes = {MakeNode("Mul", {"x", "w"}, {"a"}), MakeNode("Mul", {"a", "k"}, {"b"}),
             MakeNode("Add", {"a", "b"}, {"y"})};
  g.nodes[1].name = "Mul_1";
  g.initializers = {{"w", Floats({3}, {1.0f, 2.0f, 3.0f})},
                    {"k", Floats({3}, {0.5f, 0.25f, 2.0f})},
                    {"unused", Floats({1}, {7.0f})}};
  g.constants = {"k"};
  for (const char* name : {"x", "w", "k", "a", "b", "y"}) g.values[name] = {DType::kFloat32, {3}};
  g.values["unused"] = {DType::kFloat32, {1}};
  return g;
}

TEST(Program, ParametersAreTheFilesFloatInitializersTheOutputNeeds) {
  for (const char* op : {"Mul", "Add"}) {
    if (std::find(SupportedOps().begin(), SupportedOps().end(), op) == SupportedOps().end()) {
      GTEST_SKIP() << "needs " << op;
    }
  }
  auto p = Program::Create(TwoReaders());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->parameters(), std::vector<std::string>{"w"});
  EXPECT_TRUE((*p)->state().empty());
}

TEST(Program, GradientOfAValueReadTwiceIsTheSumOfBoth) {
  for (const char* op : {"Mul", "Add"}) {
    if (std::find(SupportedOps().begin(), SupportedOps().end(), op) == SupportedOps().end()) {
      GTEST_SKIP() << "needs " << op;
    }
  }
  auto p = Program::Create(TwoReaders());
  ASSERT_TRUE(p.ok()) << p.status();
  Program& prog = **p;
  prog.Input(0).floats = {1.0f, -2.0f, 4.0f};
  RunContext ctx;
  uint64_t counter = 0;
  ctx.dropout_counter = &counter;
  prog.Forward(ctx);
  // y = a (1 + k), a = x w.
  EXPECT_EQ(prog.Output(0).floats, (std::vector<float>{1.5f, -5.0f, 36.0f}));
  Value seed;
  seed.Reset(DType::kFloat32, {3});
  seed.floats = {1.0f, 1.0f, 1.0f};
  prog.Backward(ctx, 0, seed);
  // dy/dw = x (1 + k): the Add's contribution (node 2) and the second Mul's
  // (node 1) meet at a, added in (node, input) order.
  EXPECT_EQ(prog.Gradient("w").floats, (std::vector<float>{1.5f, -2.5f, 12.0f}));
}

// y = x first w op k op k ... (`links` times op with the constant k), n values
// each.
Graph Chain(const char* first, const char* op, int links, int64_t n, float k) {
  Graph g;
  g.opset = 17;
  g.inputs = {"x"};
  g.outputs = {"y"};
  std::string last = "a0";
  g.nodes = {MakeNode(first, {"x", "w"}, {last})};
  for (int i = 1; i <= links; ++i) {
    const std::string next = i == links ? "y" : "a" + std::to_string(i);
    g.nodes.push_back(MakeNode(op, {last, "k"}, {next}));
    g.nodes.back().name = std::string(op) + "_" + std::to_string(i);
    g.values[next] = {DType::kFloat32, {n}};
    last = next;
  }
  g.initializers = {{"w", Floats({n}, std::vector<float>(n, 3.0f))},
                    {"k", Floats({n}, std::vector<float>(n, k))}};
  g.constants = {"k"};
  for (const char* name : {"x", "w", "k", "a0"}) g.values[name] = {DType::kFloat32, {n}};
  return g;
}

// Training passes as GraphModel runs them on the CPU (the seed all ones): the
// caller's gradient buffers, by parameter, are swapped in for each reverse
// pass and hold the parameters' gradients after it.
struct Training {
  explicit Training(std::initializer_list<std::string> parameters) {
    ctx.dropout_counter = &dropout_counter;
    for (const std::string& name : parameters) grads[name];
  }
  Training(const Training&) = delete;
  Training& operator=(const Training&) = delete;

  // One pass: the bytes the program holds after it (the gradients are not
  // among them).
  size_t Pass(Program& prog) {
    prog.Forward(ctx);
    const Shape& out = prog.Output(0).shape;
    Value seed = prog.TakeGradient(ctx, out);
    seed.floats.assign(NumElements(out), 1.0f);
    for (auto& [name, g] : grads) std::swap(g, prog.GradientBuffer(name));
    prog.Backward(ctx, 0, std::move(seed));
    for (auto& [name, g] : grads) std::swap(g, prog.GradientBuffer(name));
    return prog.BytesHeld();
  }

  uint64_t dropout_counter = 0;
  RunContext ctx;
  std::map<std::string, Value> grads;
};

// Three passes of a 16-link chain of `op`: w's gradient, the buffers the
// program holds after each pass and the most values and gradients it had in
// use at once (the rest of what it holds: x, w, k and y), in values of n
// floats.
void ExpectChainHolds(const char* op, float k, float dw, size_t most_values, size_t in_use,
                      const char* first = nullptr) {
  if (std::find(SupportedOps().begin(), SupportedOps().end(), op) == SupportedOps().end()) {
    GTEST_SKIP() << "needs " << op;
  }
  constexpr int64_t kN = 4096;
  auto p = Program::Create(Chain(first != nullptr ? first : op, op, 16, kN, k));
  ASSERT_TRUE(p.ok()) << p.status();
  Program& prog = **p;
  prog.Input(0).floats.assign(kN, 0.5f);
  Training training({"w"});
  size_t first_pass = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const size_t bytes = training.Pass(prog);
    EXPECT_EQ(training.grads["w"].floats, std::vector<float>(kN, dw));
    // Every pass needs the same memory.
    if (pass == 0) {
      first_pass = bytes;
    } else {
      EXPECT_EQ(bytes, first_pass) << op << " took more memory";
    }
  }
  EXPECT_LE(first_pass, most_values * kN * sizeof(float)) << op;
  EXPECT_EQ(prog.PeakBytesInUse(), in_use * kN * sizeof(float)) << op;
  EXPECT_EQ(prog.ArenaBytes(), in_use * kN * sizeof(float)) << op;
}

// Pow's rule for its base reads both operands, so the 16 values between the
// links stay until the reverse pass reaches their readers, but the gradients
// no longer pile up beside them (one a value was kept before): x, w, k, y,
// the 16, the seed and the gradients in flight.
TEST(Program, TheReversePassHoldsAFewGradientsAtATimeNotOneAValue) {
  ExpectChainHolds("Pow", 1.0f, 0.5f, 22, 18, "Mul");  // dy/dw = x (k a^(k-1))^16, exact
}

// Mul's rule for one operand reads only the other, and k's gradient is never
// asked for (a constant), so as with Add each value between the links goes
// once the next link has read it (an attention's scaled scores).
TEST(Program, AValueScaledByAConstantGoesOnceTheForwardPassHasReadIt) {
  ExpectChainHolds("Mul", 2.0f, 0.5f * 65536.0f, 6, 2);  // dy/dw = x k^16, exact in float
}

// Add's rule reads no operand: each value between the links goes as soon as
// the next link has read it, and the reverse pass reuses that memory: x, w,
// k, y and two values in flight (w's gradient is in the caller's buffer).
TEST(Program, AValueNoRuleReadsGoesOnceTheForwardPassHasReadIt) {
  ExpectChainHolds("Add", 2.0f, 1.0f, 6, 2);
}

// Each Add's operand a has the output's shape and k wants no gradient, so
// the reverse pass hands the chain's gradient down as it is: no Add rule runs
// (no copy of dy), and w's gradient is still x.
TEST(Program, AnAddsOperandOfTheOutputsShapeTakesItsGradientAsItIs) {
  for (const char* op : {"Add", "Mul"}) {
    if (std::find(SupportedOps().begin(), SupportedOps().end(), op) == SupportedOps().end())
      GTEST_SKIP() << "needs " << op;
  }
  constexpr int64_t kN = 64;
  auto p = Program::Create(Chain("Mul", "Add", 4, kN, 2.0f));
  ASSERT_TRUE(p.ok()) << p.status();
  Program& prog = **p;
  prog.Input(0).floats.assign(kN, 0.5f);
  Training training({"w"});
  OpTimes times;
  training.ctx.op_times = &times;
  for (int pass = 0; pass < 2; ++pass) {
    training.Pass(prog);
    EXPECT_EQ(training.grads["w"].floats, std::vector<float>(kN, 0.5f));
  }
  EXPECT_EQ(times.count("Add forward"), 1u);
  EXPECT_EQ(times.count("Add backward"), 0u);
  EXPECT_EQ(times.count("Mul backward"), 1u);
}

// y = x * w + w: w's gradient sums the Mul's contribution (node 0, written
// into the caller's buffer) and the Add's, in (node, input) order.
TEST(Program, AParameterReadTwiceSumsIntoTheCallersBuffer) {
  Graph g;
  g.opset = 17;
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.nodes = {MakeNode("Mul", {"x", "w"}, {"a"}), MakeNode("Add", {"a", "w"}, {"y"})};
  g.nodes[1].name = "Add_1";
  g.initializers = {{"w", Floats({3}, {1.0f, 2.0f, 3.0f})}};
  for (const char* name : {"x", "w", "a", "y"}) g.values[name] = {DType::kFloat32, {3}};
  auto p = Program::Create(std::move(g));
  ASSERT_TRUE(p.ok()) << p.status();
  Program& prog = **p;
  prog.Input(0).floats = {1.0f, -2.0f, 4.0f};
  Training training({"w"});
  std::vector<float>& dw = training.grads["w"].floats;
  dw.assign(3, 7.0f);  // overwritten, not added to
  const float* buffer = dw.data();
  training.Pass(prog);
  EXPECT_EQ(training.grads["w"].floats, (std::vector<float>{2.0f, -1.0f, 5.0f}));
  EXPECT_EQ(training.grads["w"].floats.data(), buffer);
}

// Two linear layers as PyTorch exports them: y = (x W1^T) W2^T, each
// transposed weight a Transpose node, all [n, n].
Graph TwoLinearLayers(int64_t n) {
  Graph g;
  g.opset = 17;
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.nodes = {MakeNode("Transpose", {"w1"}, {"t1"}), MakeNode("MatMul", {"x", "t1"}, {"h"}),
             MakeNode("Transpose", {"w2"}, {"t2"}), MakeNode("MatMul", {"h", "t2"}, {"y"})};
  for (size_t i = 0; i < g.nodes.size(); ++i) g.nodes[i].name += std::to_string(i);
  std::vector<float> w1(n * n), w2(n * n);
  for (int64_t e = 0; e < n * n; ++e) {
    w1[e] = static_cast<float>(e % 3);
    w2[e] = static_cast<float>(e % 5) - 2.0f;
  }
  g.initializers = {{"w1", Floats({n, n}, w1)}, {"w2", Floats({n, n}, w2)}};
  for (const char* name : {"x", "w1", "w2", "t1", "t2", "h", "y"}) {
    g.values[name] = {DType::kFloat32, {n, n}};
  }
  return g;
}

// The transposed weights are not kept for the reverse pass but transposed
// again before the MatMul backward that reads them, with the same gradients
// (small integers: exact): the second layer's transpose takes the first's
// memory, so the program holds nine n x n buffers where keeping both
// transposed weights took ten (the weights' gradients are the caller's).
TEST(Program, ATransposedWeightIsTransposedAgainForTheReversePass) {
  constexpr int64_t kN = 64;
  auto p = Program::Create(TwoLinearLayers(kN));
  ASSERT_TRUE(p.ok()) << p.status();
  Program& prog = **p;
  prog.Input(0).floats.assign(kN * kN, 1.0f);
  Training training({"w1", "w2"});
  const std::vector<float>& dw1 = training.grads["w1"].floats;
  const std::vector<float>& dw2 = training.grads["w2"].floats;
  std::vector<float> first_dw1, first_dw2;
  const float* first_buffer = nullptr;
  size_t bytes = 0;
  for (int pass = 0; pass < 2; ++pass) {
    bytes = training.Pass(prog);
    if (pass == 0) {
      first_dw1 = dw1;
      first_dw2 = dw2;
      first_buffer = dw1.data();
    }
  }
  // Written in place: the buffer the first pass sized holds the second's.
  EXPECT_EQ(dw1.data(), first_buffer);
  // dy/dW2[j][k] = sum over rows of h[r][k] (dy all ones), h[r][k] = sum_i W1[k][i];
  // dy/dW1[k][i] = sum over rows of x[r][i] * (sum_j W2[j][k]).
  const Graph g = TwoLinearLayers(kN);
  const std::vector<float>& w1 = g.initializers.at("w1").floats;
  const std::vector<float>& w2 = g.initializers.at("w2").floats;
  for (int64_t k = 0; k < kN; ++k) {
    float h = 0.0f, col = 0.0f;
    for (int64_t i = 0; i < kN; ++i) h += w1[k * kN + i];
    for (int64_t j = 0; j < kN; ++j) col += w2[j * kN + k];
    for (int64_t j = 0; j < kN; ++j) ASSERT_EQ(dw2[j * kN + k], kN * h);
    for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(dw1[k * kN + i], kN * col);
  }
  EXPECT_EQ(dw1, first_dw1);
  EXPECT_EQ(dw2, first_dw2);
  EXPECT_LE(bytes, 9 * kN * kN * sizeof(float));
  EXPECT_EQ(prog.ArenaBytes(), prog.PeakBytesInUse());
}

// y = Dropout(x * w) in training as PyTorch exports it: the node names its
// mask, which the graph returns or (as PyTorch's graphs do) nothing reads.
Graph ScaledDropout(int64_t n, bool return_mask) {
  Graph g;
  g.opset = 17;
  g.inputs = {"x"};
  g.outputs = {"y"};
  if (return_mask) g.outputs.push_back("mask");
  g.nodes = {MakeNode("Mul", {"x", "w"}, {"a"}),
             MakeNode("Dropout", {"a", "ratio", "training"}, {"y", "mask"})};
  ConstantTensor training;
  training.dtype = DType::kBool;
  training.ints = {1};
  g.initializers = {{"w", Floats({n}, std::vector<float>(n, 3.0f))},
                    {"ratio", Floats({}, {0.5f})},
                    {"training", training}};
  g.constants = {"ratio", "training"};
  for (const char* name : {"x", "w", "a", "y"}) g.values[name] = {DType::kFloat32, {n}};
  g.values["ratio"] = {DType::kFloat32, {}};
  g.values["training"] = {DType::kBool, {}};
  g.values["mask"] = {DType::kBool, {n}};
  return g;
}

// The mask nobody reads is left out (in BERT-base, 37 of them held 1.2 GB of
// int64): the program holds none of its elements, and the pass draws the
// same dropout and gradient as when the graph returns the mask.
TEST(Program, AnOptionalOutputNothingReadsIsLeftOut) {
  constexpr int64_t kN = 4096;
  std::vector<float> y[2], dw[2];
  size_t held[2] = {0, 0};
  for (const bool return_mask : {false, true}) {
    auto p = Program::Create(ScaledDropout(kN, return_mask));
    ASSERT_TRUE(p.ok()) << p.status();
    Program& prog = **p;
    prog.Input(0).floats.assign(kN, 1.0f);
    Training training({"w"});
    held[return_mask] = training.Pass(prog);
    y[return_mask] = prog.Output(0).floats;
    dw[return_mask] = training.grads["w"].floats;
    if (!return_mask) continue;
    const Value& mask = prog.Output(1);
    ASSERT_EQ(mask.ints.size(), static_cast<size_t>(kN));
    for (int64_t i = 0; i < kN; ++i) {
      ASSERT_EQ(mask.ints[i], y[1][i] != 0.0f ? 1 : 0) << i;
      ASSERT_EQ(y[1][i], mask.ints[i] != 0 ? 6.0f : 0.0f) << i;  // 3 / (1 - 0.5)
    }
  }
  EXPECT_EQ(y[0], y[1]);
  EXPECT_EQ(dw[0], dw[1]);
  EXPECT_LE(held[0] + kN * sizeof(int64_t), held[1]);
}

TEST(Program, RefusesAGraphWithoutOutputs) {
  Graph g = TwoReaders();
  g.outputs.clear();
  auto p = Program::Create(std::move(g));
  EXPECT_FALSE(p.ok());
}

}  // namespace
}  // namespace easyscale::graph
