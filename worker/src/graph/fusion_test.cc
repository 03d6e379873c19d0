// Graph rewrites (fusion.h): which GELU chains fuse, and that a fused one
// trains to the chain's bits.
#include "graph/fusion.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "graph/program.h"
#include "graph/testing/op_check.h"

namespace easyscale::graph {
namespace {

using testing::MakeNode;
using testing::RandomValue;

// y = GELU(h) as PyTorch exports it, h = x * w, over [2, n]; the constants
// are the loader's (Constant nodes).
Graph GeluGraph(int64_t n) {
  Graph g;
  g.opset = 17;
  auto constant = [&](const std::string& name, float v) {
    ConstantTensor c;
    c.floats = {v};
    g.initializers[name] = c;
    g.constants.insert(name);
    g.values[name] = {DType::kFloat32, {}};
  };
  constant("sqrt2", 1.41421356f);  // float(sqrt 2), as PyTorch writes it
  constant("one", 1.0f);
  constant("half", 0.5f);
  g.initializers["w"] = testing::ToConstant(RandomValue({n}, 11));
  g.values["w"] = {DType::kFloat32, {n}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  for (const char* name : {"x", "h", "d", "e", "p", "m", "y"}) {
    g.values[name] = {DType::kFloat32, {2, n}};
  }
  g.nodes = {MakeNode("Mul", {"x", "w"}, {"h"}), MakeNode("Div", {"h", "sqrt2"}, {"d"}),
             MakeNode("Erf", {"d"}, {"e"}),      MakeNode("Add", {"e", "one"}, {"p"}),
             MakeNode("Mul", {"h", "p"}, {"m"}), MakeNode("Mul", {"m", "half"}, {"y"})};
  for (size_t i = 0; i < g.nodes.size(); ++i) g.nodes[i].name += "_" + std::to_string(i);
  return g;
}

std::vector<std::string> Ops(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op);
  return ops;
}

TEST(FuseGeluChains, PyTorchsChainBecomesOneGeluNode) {
  Graph g = GeluGraph(5);
  EXPECT_EQ(FuseGeluChains(g), 1);
  EXPECT_EQ(Ops(g), (std::vector<std::string>{"Mul", "Gelu"}));
  EXPECT_EQ(g.nodes[1].inputs, std::vector<std::string>{"h"});
  EXPECT_EQ(g.nodes[1].outputs, std::vector<std::string>{"y"});
  for (const char* inner : {"d", "e", "p", "m"}) EXPECT_EQ(g.values.count(inner), 0u) << inner;
  EXPECT_EQ(FuseGeluChains(g), 0) << "nothing left to fuse";
}

TEST(FuseGeluChains, LeavesWhatWouldChangeABit) {
  struct Variant {
    const char* what;
    void (*change)(Graph&);
  };
  const Variant kVariants[] = {
      {"another divisor", [](Graph& g) { g.initializers["sqrt2"].floats = {1.4142134f}; }},
      {"a divisor that trains", [](Graph& g) { g.constants.erase("sqrt2"); }},
      {"another addend", [](Graph& g) { g.initializers["one"].floats = {2.0f}; }},
      {"another factor", [](Graph& g) { g.initializers["half"].floats = {0.25f}; }},
      {"an inner value as a graph output", [](Graph& g) { g.outputs.push_back("p"); }},
      {"an inner value read elsewhere",
       [](Graph& g) {
         g.nodes.push_back(MakeNode("Relu", {"e"}, {"r"}));
         g.values["r"] = g.values["e"];
         g.outputs.push_back("r");
       }},
      {"X read between the Div and the Mul",
       [](Graph& g) {
         g.nodes.insert(g.nodes.begin() + 2, MakeNode("Relu", {"h"}, {"r"}));
         g.values["r"] = g.values["h"];
         g.outputs.push_back("r");
       }},
      {"the Mul's operands swapped",
       [](Graph& g) {
         g.nodes[4].inputs = {"p", "h"};
       }},
      {"the Add's operands swapped",
       [](Graph& g) {
         g.nodes[3].inputs = {"one", "e"};
       }},
      {"an Add of one input (malformed)", [](Graph& g) { g.nodes[3].inputs = {"e"}; }},
  };
  for (const Variant& v : kVariants) {
    Graph g = GeluGraph(5);
    v.change(g);
    const size_t nodes = g.nodes.size();
    EXPECT_EQ(FuseGeluChains(g), 0) << v.what;
    EXPECT_EQ(g.nodes.size(), nodes) << v.what;
  }
  // A reader of X after the chain keeps it fusable: X's gradient still adds
  // the Div's and the Mul's contributions first.
  Graph g = GeluGraph(5);
  g.nodes.push_back(MakeNode("Relu", {"h"}, {"r"}));
  g.values["r"] = g.values["h"];
  g.outputs.push_back("r");
  EXPECT_EQ(FuseGeluChains(g), 1);
}

// One forward and backward pass: y and w's gradient for input x and y's
// gradient dy.
struct Pass {
  std::vector<float> y, dw;
};

Pass RunPass(Graph g, const Value& x, const Value& dy) {
  auto program = Program::Create(std::move(g));
  EXPECT_TRUE(program.ok()) << program.status();
  Program& p = **program;
  p.Input(0) = x;
  RunContext ctx;
  uint64_t counter = 0;
  ctx.dropout_counter = &counter;
  p.Forward(ctx);
  Pass pass{p.Output(0).floats, {}};
  p.Backward(ctx, 0, dy);
  pass.dw = p.Gradient("w").floats;
  return pass;
}

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> bits;
  for (float f : v) bits.push_back(std::bit_cast<uint32_t>(f));
  return bits;
}

TEST(FuseGeluChains, TrainsToTheChainsBits) {
  constexpr int64_t kN = 4096;
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f,  -0.0f,  inf,  -inf,  std::nanf(""), 1e-40f, -1e-40f,
                           1e30f, -1e30f, 3.9f, -3.9f, 5.5f,          -5.5f,  1e-3f};
  Value x = RandomValue({2, kN}, 12);
  Value dy = RandomValue({2, kN}, 13);
  for (size_t i = 0; i < x.floats.size(); ++i) {
    x.floats[i] *= 8.0f;  // across erf's whole range
    if (i % 7 == 0) x.floats[i] = special[(i / 7) % std::size(special)];
    if (i % 11 == 0) dy.floats[i] = special[(i / 11) % std::size(special)];
  }
  Graph fused = GeluGraph(kN);
  // The same graph with p also an output: FuseGeluChains leaves it, so the
  // program runs the five ops.
  Graph chain = GeluGraph(kN);
  chain.outputs.push_back("p");
  Graph check = fused;
  ASSERT_EQ(FuseGeluChains(check), 1);
  ASSERT_EQ(FuseGeluChains(chain), 0);
  const Pass want = RunPass(chain, x, dy);
  const Pass got = RunPass(fused, x, dy);
  EXPECT_EQ(Bits(got.y), Bits(want.y));
  EXPECT_EQ(Bits(got.dw), Bits(want.dw));
}

}  // namespace
}  // namespace easyscale::graph
