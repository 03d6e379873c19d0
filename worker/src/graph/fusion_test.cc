// Graph rewrites (fusion.h): which GELU chains, batch norms' Relus, linear
// layers, weights' transposes, attention transposes, scaled softmaxes,
// dropped softmaxes and residual dropouts fuse, and that a fused one trains
// to the unfused nodes' bits.
#include "graph/fusion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
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

// A change to a fusable graph after which a rewrite must leave it as it is.
struct Unfusable {
  const char* what;
  void (*change)(Graph&);
};

// Each variant's change of make()'s graph leaves `fuse` nothing to fuse.
void ExpectNoneFused(const std::function<Graph()>& make, int (*fuse)(Graph&),
                     std::span<const Unfusable> variants) {
  for (const Unfusable& v : variants) {
    Graph g = make();
    v.change(g);
    const size_t nodes = g.nodes.size();
    EXPECT_EQ(fuse(g), 0) << v.what;
    EXPECT_EQ(g.nodes.size(), nodes) << v.what;
  }
}

// Another reader of `value`: a Relu into a new graph output r, at node index
// `at` (the end by default).
void AddReader(Graph& g, const std::string& value, size_t at = SIZE_MAX) {
  g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(std::min(at, g.nodes.size())),
                 MakeNode("Relu", {value}, {"r"}));
  g.values["r"] = g.values[value];
  g.outputs.push_back("r");
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
  const Unfusable kVariants[] = {
      {"another divisor", [](Graph& g) { g.initializers["sqrt2"].floats = {1.4142134f}; }},
      {"a divisor that trains", [](Graph& g) { g.constants.erase("sqrt2"); }},
      {"another addend", [](Graph& g) { g.initializers["one"].floats = {2.0f}; }},
      {"another factor", [](Graph& g) { g.initializers["half"].floats = {0.25f}; }},
      {"an inner value as a graph output", [](Graph& g) { g.outputs.push_back("p"); }},
      {"an inner value read elsewhere", [](Graph& g) { AddReader(g, "e"); }},
      {"X read between the Div and the Mul", [](Graph& g) { AddReader(g, "h", 2); }},
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
  ExpectNoneFused([] { return GeluGraph(5); }, FuseGeluChains, kVariants);
  // A reader of X after the chain keeps it fusable: X's gradient still adds
  // the Div's and the Mul's contributions first.
  Graph g = GeluGraph(5);
  AddReader(g, "h");
  EXPECT_EQ(FuseGeluChains(g), 1);
}

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> bits;
  for (float f : v) bits.push_back(std::bit_cast<uint32_t>(f));
  return bits;
}

// One forward and backward pass for input x and output 0's gradient dy: the
// output's bits, then each of `params`' gradient's.
std::vector<std::vector<uint32_t>> RunPass(Graph g, const Value& x, const Value& dy,
                                           const std::vector<std::string>& params) {
  auto program = Program::Create(std::move(g));
  EXPECT_TRUE(program.ok()) << program.status();
  Program& p = **program;
  p.Input(0) = x;
  RunContext ctx;
  uint64_t counter = 0;
  ctx.dropout_counter = &counter;
  p.Forward(ctx);
  std::vector<std::vector<uint32_t>> bits = {Bits(p.Output(0).floats)};
  p.Backward(ctx, 0, dy);
  for (const std::string& name : params) bits.push_back(Bits(p.Gradient(name).floats));
  return bits;
}

// `graph` fused by `fuse` (once) trains to the bits of the same graph with
// `kept` also a graph output, which leaves `fuse` nothing to fuse.
void ExpectFusedBitsAsApart(const Graph& graph, int (*fuse)(Graph&), const std::string& kept,
                            const Value& x, const Value& dy,
                            const std::vector<std::string>& params) {
  Graph apart = graph;
  apart.outputs.push_back(kept);
  Graph check = graph, check_apart = apart;
  ASSERT_EQ(fuse(check), 1);
  ASSERT_EQ(fuse(check_apart), 0);
  EXPECT_EQ(RunPass(graph, x, dy, params), RunPass(apart, x, dy, params));
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
  EXPECT_EQ(RunPass(fused, x, dy, {"w"}), RunPass(chain, x, dy, {"w"}));
}

// z = x W + b as PyTorch exports a linear layer over [2, 3, k] (bias_first:
// Add(b, y), as it writes it; else Add(y, b)).
Graph LinearGraph(int64_t k, int64_t n, bool bias_first) {
  Graph g;
  g.opset = 17;
  g.initializers["w"] = testing::ToConstant(RandomValue({k, n}, 21));
  g.initializers["b"] = testing::ToConstant(RandomValue({n}, 22));
  g.values["w"] = {DType::kFloat32, {k, n}};
  g.values["b"] = {DType::kFloat32, {n}};
  g.values["x"] = {DType::kFloat32, {2, 3, k}};
  g.values["y"] = {DType::kFloat32, {2, 3, n}};
  g.values["z"] = {DType::kFloat32, {2, 3, n}};
  g.inputs = {"x"};
  g.outputs = {"z"};
  g.nodes = {
      MakeNode("MatMul", {"x", "w"}, {"y"}),
      MakeNode("Add",
               bias_first ? std::vector<std::string>{"b", "y"} : std::vector<std::string>{"y", "b"},
               {"z"})};
  g.nodes[0].name = "/fc/MatMul";
  g.nodes[1].name = "/fc/Add";
  return g;
}

TEST(FuseMatMulBiases, ALinearLayerBecomesOneNodeWithTheBiasOrder) {
  for (bool bias_first : {false, true}) {
    Graph g = LinearGraph(5, 4, bias_first);
    EXPECT_EQ(FuseMatMulBiases(g), 1);
    EXPECT_EQ(Ops(g), std::vector<std::string>{"MatMul+Add"});
    EXPECT_EQ(g.nodes[0].name, "/fc/MatMul+Add");
    EXPECT_EQ(g.nodes[0].inputs, (std::vector<std::string>{"x", "w", "b"}));
    EXPECT_EQ(g.nodes[0].outputs, std::vector<std::string>{"z"});
    EXPECT_EQ(*g.nodes[0].Get<int64_t>("bias_first", -1), bias_first ? 1 : 0);
    EXPECT_EQ(g.values.count("y"), 0u);
    EXPECT_EQ(FuseMatMulBiases(g), 0) << "nothing left to fuse";
  }
}

TEST(FuseMatMulBiases, LeavesWhatWouldChangeABit) {
  const Unfusable kVariants[] = {
      {"the product as a graph output", [](Graph& g) { g.outputs.push_back("y"); }},
      {"the product read elsewhere", [](Graph& g) { AddReader(g, "y"); }},
      {"the bias read elsewhere", [](Graph& g) { AddReader(g, "b"); }},
      {"a bias that is data",
       [](Graph& g) {
         g.initializers.erase("b");
         g.inputs.push_back("b");
       }},
      {"a bias of shape [1, n]",
       [](Graph& g) {
         g.values["b"].shape = {1, 4};
         g.initializers["b"].shape = {1, 4};
       }},
      {"a product's own sum",
       [](Graph& g) {
         g.nodes[1].inputs = {"y", "y"};
       }},
      {"a batched B",
       [](Graph& g) {
         g.values["w"].shape = {2, 5, 4};
         g.initializers["w"] = testing::ToConstant(RandomValue({2, 5, 4}, 23));
       }},
  };
  ExpectNoneFused([] { return LinearGraph(5, 4, false); }, FuseMatMulBiases, kVariants);
}

TEST(FuseMatMulBiases, TrainsToTheTwoNodesBits) {
  constexpr int64_t kK = 37, kN = 29;
  const float inf = std::numeric_limits<float>::infinity();
  Value x = RandomValue({2, 3, kK}, 24);
  Value dz = RandomValue({2, 3, kN}, 25);
  x.floats[3] = -0.0f, x.floats[40] = 1e30f, dz.floats[7] = -0.0f, dz.floats[11] = inf;
  for (bool bias_first : {false, true}) {
    SCOPED_TRACE(bias_first ? "bias first" : "bias second");
    // With y also an output, the program runs the two nodes.
    ExpectFusedBitsAsApart(LinearGraph(kK, kN, bias_first), FuseMatMulBiases, "y", x, dz,
                           {"w", "b"});
  }
}

// y = h Wt (+ b) as PyTorch exports a linear layer over [2, 3, k] with its
// weight w stored [n, k]: Wt = Transpose(w), after h = Add(x, p) so that p's
// gradient is x's.
Graph TransposedLinearGraph(int64_t k, int64_t n, bool bias) {
  Graph g;
  g.opset = 17;
  g.initializers["p"] = testing::ToConstant(RandomValue({2, 3, k}, 41));
  g.initializers["w"] = testing::ToConstant(RandomValue({n, k}, 42));
  g.values["p"] = g.values["x"] = g.values["h"] = {DType::kFloat32, {2, 3, k}};
  g.values["w"] = {DType::kFloat32, {n, k}};
  g.values["wt"] = {DType::kFloat32, {k, n}};
  g.values["y"] = {DType::kFloat32, {2, 3, n}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.nodes = {MakeNode("Add", {"x", "p"}, {"h"}), MakeNode("Transpose", {"w"}, {"wt"}),
             MakeNode("MatMul", {"h", "wt"}, {"y"})};
  g.nodes[1].name = "/fc/Transpose";
  g.nodes[2].name = "/fc/MatMul";
  if (bias) {
    g.initializers["b"] = testing::ToConstant(RandomValue({n}, 43));
    g.values["b"] = {DType::kFloat32, {n}};
    g.values["z"] = g.values["y"];
    g.outputs = {"z"};
    g.nodes.push_back(MakeNode("Add", {"b", "y"}, {"z"}));
  }
  return g;
}

TEST(FuseTransposedWeights, ALinearLayerReadsItsWeightAsStored) {
  for (bool bias : {false, true}) {
    Graph g = TransposedLinearGraph(5, 4, bias);
    EXPECT_EQ(FuseMatMulBiases(g), bias ? 1 : 0);
    EXPECT_EQ(FuseTransposedWeights(g), 1);
    const std::string op = bias ? "Transpose+MatMul+Add" : "Transpose+MatMul";
    EXPECT_EQ(Ops(g), (std::vector<std::string>{"Add", op}));
    EXPECT_EQ(g.nodes[1].name, bias ? "/fc/Transpose+/fc/MatMul+Add" : "/fc/Transpose+/fc/MatMul");
    EXPECT_EQ(g.nodes[1].inputs, bias ? (std::vector<std::string>{"h", "w", "b"})
                                      : (std::vector<std::string>{"h", "w"}));
    EXPECT_EQ(g.values.count("wt"), 0u);
    EXPECT_EQ(FuseTransposedWeights(g), 0) << "nothing left to fuse";
  }
  // perm [1, 0] written out is the default's.
  Graph g = TransposedLinearGraph(5, 4, false);
  g.nodes[1].attributes["perm"] = std::vector<int64_t>{1, 0};
  EXPECT_EQ(FuseTransposedWeights(g), 1);
}

TEST(FuseTransposedWeights, LeavesWhatWouldChangeABit) {
  const Unfusable kVariants[] = {
      {"the transpose as a graph output", [](Graph& g) { g.outputs.push_back("wt"); }},
      {"the transpose read elsewhere", [](Graph& g) { AddReader(g, "wt"); }},
      {"the weight read elsewhere", [](Graph& g) { AddReader(g, "w"); }},
      {"a transpose that moves nothing",
       [](Graph& g) {
         g.nodes[1].attributes["perm"] = std::vector<int64_t>{0, 1};
       }},
      {"the transpose as the product's A",
       [](Graph& g) {
         g.nodes[2].inputs = {"wt", "h"};
       }},
      {"a batched weight",
       [](Graph& g) {
         g.values["w"].shape = {2, 4, 5};
         g.values["wt"].shape = {5, 4, 2};
       }},
  };
  for (bool bias : {false, true}) {
    ExpectNoneFused(
        [bias] {
          Graph g = TransposedLinearGraph(5, 4, bias);
          FuseMatMulBiases(g);
          return g;
        },
        FuseTransposedWeights, kVariants);
  }
}

TEST(FuseTransposedWeights, TrainsToTheTwoNodesBits) {
  // 2 samples of 3 rows: the weight's gradient in two k blocks (one a sample).
  constexpr int64_t kK = 37, kN = 29;
  const float inf = std::numeric_limits<float>::infinity();
  Value x = RandomValue({2, 3, kK}, 44);
  Value dy = RandomValue({2, 3, kN}, 45);
  x.floats[3] = -0.0f, x.floats[40] = 1e30f, dy.floats[7] = -0.0f, dy.floats[11] = inf;
  for (bool bias : {false, true}) {
    Graph fused = TransposedLinearGraph(kK, kN, bias);
    // The same graph with Wt also an output: the program runs the Transpose.
    Graph apart = TransposedLinearGraph(kK, kN, bias);
    apart.outputs.push_back("wt");
    Graph check = fused, check_apart = apart;
    FuseMatMulBiases(check);
    FuseMatMulBiases(check_apart);
    ASSERT_EQ(FuseTransposedWeights(check), 1);
    ASSERT_EQ(FuseTransposedWeights(check_apart), 0);
    std::vector<std::string> params = {"p", "w"};
    if (bias) params.push_back("b");
    EXPECT_EQ(RunPass(fused, x, dy, params), RunPass(apart, x, dy, params)) << "bias " << bias;
  }
}

// An attention's products as PyTorch exports them over [B, S, H, D] =
// [2, 5, 3, 4]: q = Transpose(x + p, (0, 2, 1, 3)), kt = Transpose(k,
// (0, 2, 3, 1)), v likewise from w, s = q kt, c = s v, and the heads merged,
// o = Transpose(c, (0, 2, 1, 3)); p, k and w parameters.
Graph AttentionGraph() {
  Graph g;
  g.opset = 17;
  const Shape split = {2, 5, 3, 4};
  for (const char* name : {"p", "k", "w"}) {
    g.initializers[name] = testing::ToConstant(RandomValue(split, name[0]));
    g.values[name] = {DType::kFloat32, split};
  }
  g.values["x"] = g.values["xp"] = g.values["o"] = {DType::kFloat32, split};
  g.values["q"] = g.values["v"] = g.values["c"] = {DType::kFloat32, {2, 3, 5, 4}};
  g.values["kt"] = {DType::kFloat32, {2, 3, 4, 5}};
  g.values["s"] = {DType::kFloat32, {2, 3, 5, 5}};
  g.inputs = {"x"};
  g.outputs = {"o"};
  const auto transpose = [](const std::string& in, const std::string& out,
                            std::vector<int64_t> perm) {
    return MakeNode("Transpose", {in}, {out}, {{"perm", std::move(perm)}});
  };
  g.nodes = {MakeNode("Add", {"x", "p"}, {"xp"}),    transpose("xp", "q", {0, 2, 1, 3}),
             transpose("k", "kt", {0, 2, 3, 1}),     transpose("w", "v", {0, 2, 1, 3}),
             MakeNode("MatMul", {"q", "kt"}, {"s"}), MakeNode("MatMul", {"s", "v"}, {"c"}),
             transpose("c", "o", {0, 2, 1, 3})};
  return g;
}

TEST(FuseTransposedOperands, TheAttentionsProductsReadAndWriteInPlace) {
  Graph g = AttentionGraph();
  EXPECT_EQ(FuseTransposedOperands(g), 2);
  EXPECT_EQ(Ops(g), (std::vector<std::string>{"Add", "StridedMatMul", "StridedMatMul"}));
  const Node& scores = g.nodes[1];
  const Node& context = g.nodes[2];
  EXPECT_EQ(scores.inputs, (std::vector<std::string>{"xp", "k"}));
  EXPECT_EQ(scores.outputs, std::vector<std::string>{"s"});
  EXPECT_EQ(*scores.Get<std::vector<int64_t>>("perm_a", {}), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(*scores.Get<std::vector<int64_t>>("perm_b", {}), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(scores.attributes.count("perm_y"), 0u);
  EXPECT_EQ(context.inputs, (std::vector<std::string>{"s", "w"}));
  EXPECT_EQ(context.outputs, std::vector<std::string>{"o"});
  EXPECT_EQ(context.attributes.count("perm_a"), 0u);
  EXPECT_EQ(*context.Get<std::vector<int64_t>>("perm_y", {}), (std::vector<int64_t>{0, 2, 1, 3}));
  for (const char* between : {"q", "kt", "v", "c"}) EXPECT_EQ(g.values.count(between), 0u);
  EXPECT_EQ(FuseTransposedOperands(g), 0) << "nothing left to fuse";
}

// AttentionGraph with its heads split from rows of 12 and merged back, as
// PyTorch exports them: x, p, k and w are [2, 5, 12], each source Reshaped
// to [2, 5, 3, 4] before its Transpose, and o Reshaped to rows r.
Graph RowsAttentionGraph() {
  Graph g = AttentionGraph();
  const Shape rows = {2, 5, 12};
  const auto shape_constant = [&](const std::string& name, std::vector<int64_t> dims) {
    ConstantTensor c;
    c.dtype = DType::kInt64;
    c.shape = {static_cast<int64_t>(dims.size())};
    c.ints = std::move(dims);
    g.initializers[name] = c;
    g.constants.insert(name);
    g.values[name] = {DType::kInt64, c.shape};
  };
  shape_constant("split", {2, 5, 3, 4});
  shape_constant("merge", {2, 5, 12});
  std::vector<Node> reshapes;
  for (const std::string name : {"k", "w"}) {
    g.initializers.erase(name);
    g.initializers[name + "r"] = testing::ToConstant(RandomValue(rows, name[0] + 1));
    g.values[name + "r"] = {DType::kFloat32, rows};
    reshapes.push_back(MakeNode("Reshape", {name + "r", "split"}, {name}));
  }
  g.values["x"] = g.values["p"] = g.values["xr"] = g.values["r"] = {DType::kFloat32, rows};
  g.initializers["p"] = testing::ToConstant(RandomValue(rows, 'p'));
  g.nodes[0].outputs = {"xr"};
  reshapes.push_back(MakeNode("Reshape", {"xr", "split"}, {"xp"}));
  g.nodes.insert(g.nodes.begin() + 1, reshapes.begin(), reshapes.end());
  g.nodes.push_back(MakeNode("Reshape", {"o", "merge"}, {"r"}));
  g.outputs = {"r"};
  return g;
}

TEST(FuseTransposedOperands, TheirReshapesToAndFromRowsToo) {
  Graph g = RowsAttentionGraph();
  EXPECT_EQ(FuseTransposedOperands(g), 2);
  EXPECT_EQ(Ops(g), (std::vector<std::string>{"Add", "StridedMatMul", "StridedMatMul"}));
  const Node& scores = g.nodes[1];
  const Node& context = g.nodes[2];
  EXPECT_EQ(scores.inputs, (std::vector<std::string>{"xr", "kr"}));
  EXPECT_EQ(context.inputs, (std::vector<std::string>{"s", "wr"}));
  EXPECT_EQ(context.outputs, std::vector<std::string>{"r"});
  const std::vector<int64_t> split = {2, 5, 3, 4};
  EXPECT_EQ(*scores.Get<std::vector<int64_t>>("shape_a", {}), split);
  EXPECT_EQ(*scores.Get<std::vector<int64_t>>("shape_b", {}), split);
  EXPECT_EQ(*context.Get<std::vector<int64_t>>("shape_b", {}), split);
  EXPECT_EQ(*context.Get<std::vector<int64_t>>("shape_y", {}), (std::vector<int64_t>{2, 5, 12}));
  for (const char* between : {"xp", "k", "w", "o"}) EXPECT_EQ(g.values.count(between), 0u);
  // Rows read elsewhere keep their Reshape (the Transpose still fuses).
  Graph shared = RowsAttentionGraph();
  AddReader(shared, "xr");
  EXPECT_EQ(FuseTransposedOperands(shared), 2);
  EXPECT_EQ(shared.nodes.size(), 5u) << "the split's Reshape and the reader stay";
}

TEST(FuseTransposedOperands, LeavesWhatWouldChangeABitOrHasNoView) {
  const Unfusable kVariants[] = {
      {"the transposes read elsewhere",
       [](Graph& g) {
         for (const char* v : {"q", "kt", "v"}) AddReader(g, v);
         g.outputs.push_back("c");
       }},
      {"the sources read elsewhere",
       [](Graph& g) {
         for (const char* v : {"xp", "k", "w"}) AddReader(g, v);
         g.outputs.push_back("c");
       }},
      {"views moving the matrices' elements apart",
       [](Graph& g) {
         for (size_t t : {1, 2, 3})
           g.nodes[t].attributes["perm"] = std::vector<int64_t>{0, 3, 1, 2};
         // The heads' dimension last: neither rows nor columns in place.
         g.nodes[6].attributes["perm"] = std::vector<int64_t>{0, 2, 3, 1};
       }},
  };
  ExpectNoneFused(AttentionGraph, FuseTransposedOperands, kVariants);
  // Products longer than a k block: a GPU runs those per batch entry.
  Graph long_rows = AttentionGraph();
  long_rows.values["q"].shape = {2, 3, 5, 5000};
  long_rows.values["kt"].shape = {2, 3, 5000, 5};
  long_rows.values["s"].shape = {2, 3, 5, 5000};
  long_rows.values["v"].shape = {2, 3, 5000, 4};
  EXPECT_EQ(FuseTransposedOperands(long_rows), 0);
  // A broadcast batch or rank 5: not cuda::GemmBatchedStrided's batches.
  Graph g = AttentionGraph();
  g.nodes[5].inputs = {"s", "w2"};
  g.values["w2"] = {DType::kFloat32, {3, 5, 4}};
  g.outputs.push_back("c");
  EXPECT_EQ(FuseTransposedOperands(g), 1) << "the scores' product alone";
}

TEST(FuseTransposedOperands, TrainsToTheTransposesBits) {
  Value x = RandomValue({2, 5, 3, 4}, 51);
  Value dy = RandomValue({2, 5, 3, 4}, 52);
  x.floats[3] = -0.0f, x.floats[40] = 1e30f, dy.floats[7] = -0.0f;
  dy.floats[11] = std::numeric_limits<float>::infinity();
  Graph fused = AttentionGraph();
  // The same graph with the values between as outputs: the program runs the
  // Transposes and the MatMuls.
  Graph apart = AttentionGraph();
  for (const char* between : {"q", "kt", "v", "c"}) apart.outputs.push_back(between);
  Graph check = fused, check_apart = apart;
  ASSERT_EQ(FuseTransposedOperands(check), 2);
  ASSERT_EQ(FuseTransposedOperands(check_apart), 0);
  EXPECT_EQ(RunPass(fused, x, dy, {"p", "k", "w"}), RunPass(apart, x, dy, {"p", "k", "w"}));
  // With the Reshapes from and to rows.
  Value rows_x = RandomValue({2, 5, 12}, 53), rows_dy = RandomValue({2, 5, 12}, 54);
  Graph rows_apart = RowsAttentionGraph();
  for (const char* between : {"xp", "k", "w", "o"}) rows_apart.outputs.push_back(between);
  Graph rows_check = RowsAttentionGraph();
  ASSERT_EQ(FuseTransposedOperands(rows_check), 2);
  ASSERT_EQ(rows_check.nodes.size(), 3u);
  EXPECT_EQ(RunPass(RowsAttentionGraph(), rows_x, rows_dy, {"p", "kr", "wr"}),
            RunPass(rows_apart, rows_x, rows_dy, {"p", "kr", "wr"}));
}

// y = Softmax(h * c) over [2, 3, 8] rows, h = x + p, c the loader's scalar
// 1/sqrt(8) (scale_first: Mul(c, h)).
Graph ScaledSoftmaxGraph(bool scale_first) {
  Graph g;
  g.opset = 17;
  ConstantTensor c;
  c.floats = {0.35355338f};
  g.initializers["c"] = c;
  g.constants.insert("c");
  g.values["c"] = {DType::kFloat32, {}};
  g.initializers["p"] = testing::ToConstant(RandomValue({2, 3, 8}, 61));
  for (const char* name : {"x", "p", "h", "m", "y"}) g.values[name] = {DType::kFloat32, {2, 3, 8}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.nodes = {MakeNode("Add", {"x", "p"}, {"h"}),
             MakeNode("Mul",
                      scale_first ? std::vector<std::string>{"c", "h"}
                                  : std::vector<std::string>{"h", "c"},
                      {"m"}),
             MakeNode("Softmax", {"m"}, {"y"}, {{"axis", int64_t{-1}}})};
  g.nodes[1].name = "/attn/Mul";
  return g;
}

TEST(FuseScaledSoftmax, TheScoresScaleBecomesTheSoftmaxs) {
  for (bool scale_first : {false, true}) {
    Graph g = ScaledSoftmaxGraph(scale_first);
    EXPECT_EQ(FuseScaledSoftmax(g), 1);
    EXPECT_EQ(Ops(g), (std::vector<std::string>{"Add", "Mul+Softmax"}));
    const Node& fused = g.nodes[1];
    EXPECT_EQ(fused.name, "/attn/Mul+Softmax");
    EXPECT_EQ(fused.inputs, std::vector<std::string>{"h"});
    EXPECT_EQ(fused.outputs, std::vector<std::string>{"y"});
    EXPECT_EQ(*fused.Get<float>("scale", 0.0f), 0.35355338f);
    EXPECT_EQ(*fused.Get<int64_t>("axis", 0), -1);
    EXPECT_EQ(g.values.count("m"), 0u);
    EXPECT_EQ(FuseScaledSoftmax(g), 0) << "nothing left to fuse";
  }
}

TEST(FuseScaledSoftmax, LeavesWhatWouldChangeABit) {
  const Unfusable kVariants[] = {
      {"the product as a graph output", [](Graph& g) { g.outputs.push_back("m"); }},
      {"the product read elsewhere", [](Graph& g) { AddReader(g, "m"); }},
      {"a scale that trains", [](Graph& g) { g.constants.erase("c"); }},
      {"a scale per column",
       [](Graph& g) {
         g.initializers["c"].floats.assign(8, 0.5f);
         g.initializers["c"].shape = {8};
         g.values["c"].shape = {8};
       }},
      {"a broadcast X",
       [](Graph& g) {
         g.values["h"].shape = {1, 3, 8};
       }},
  };
  ExpectNoneFused([] { return ScaledSoftmaxGraph(false); }, FuseScaledSoftmax, kVariants);
}

TEST(FuseScaledSoftmax, TrainsToTheTwoNodesBits) {
  const float inf = std::numeric_limits<float>::infinity();
  Value x = RandomValue({2, 3, 8}, 62), dy = RandomValue({2, 3, 8}, 63);
  x.floats[3] = -0.0f, x.floats[9] = 1e30f, x.floats[17] = -inf, dy.floats[5] = -0.0f;
  for (bool scale_first : {false, true}) {
    SCOPED_TRACE(scale_first ? "scale first" : "scale second");
    ExpectFusedBitsAsApart(ScaledSoftmaxGraph(scale_first), FuseScaledSoftmax, "m", x, dy, {"p"});
  }
}

// z = Relu(BatchNormalization(x)) * w over [2, 3, 4, 4], training (running
// statistics as outputs), scale s and bias b trained; with `clip`, Clip(y,
// lo, hi) for the Relu, its bounds the loader's constants 0 and 0.5.
Graph ActivatedBatchNormGraph(bool clip = false) {
  Graph g;
  g.opset = 17;
  g.initializers["s"] = testing::ToConstant(RandomValue({3}, 91));
  g.initializers["b"] = testing::ToConstant(RandomValue({3}, 92));
  g.initializers["m"] = testing::ToConstant(RandomValue({3}, 93));
  Value var = RandomValue({3}, 94);
  for (float& f : var.floats) f = f + 1.5f;
  g.initializers["v"] = testing::ToConstant(var);
  g.initializers["w"] = testing::ToConstant(RandomValue({2, 3, 4, 4}, 95));
  for (const char* name : {"s", "b", "m", "v", "rm", "rv"}) g.values[name] = {DType::kFloat32, {3}};
  for (const char* name : {"x", "y", "r", "w", "z"})
    g.values[name] = {DType::kFloat32, {2, 3, 4, 4}};
  g.inputs = {"x"};
  g.outputs = {"z"};
  g.nodes = {MakeNode("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y", "rm", "rv"},
                      {{"training_mode", int64_t{1}}}),
             clip ? MakeNode("Clip", {"y", "lo", "hi"}, {"r"}) : MakeNode("Relu", {"y"}, {"r"}),
             MakeNode("Mul", {"r", "w"}, {"z"})};
  g.nodes[0].name = "/bn1/BatchNormalization";
  if (clip) {
    for (auto [name, bound] : {std::pair{"lo", 0.0f}, std::pair{"hi", 0.5f}}) {
      ConstantTensor t;
      t.floats = {bound};
      g.initializers[name] = t;
      g.constants.insert(name);
      g.values[name] = {DType::kFloat32, {}};
    }
  }
  return g;
}

TEST(FuseBatchNormActivations, TheActivationBecomesTheBatchNorms) {
  for (const bool clip : {false, true}) {
    Graph g = ActivatedBatchNormGraph(clip);
    EXPECT_EQ(FuseBatchNormActivations(g), 1);
    const std::string op = clip ? "BatchNormalization+Clip" : "BatchNormalization+Relu";
    EXPECT_EQ(Ops(g), (std::vector<std::string>{op, "Mul"}));
    const Node& fused = g.nodes[0];
    EXPECT_EQ(fused.name, "/bn1/" + op);
    EXPECT_EQ(fused.inputs, clip ? (std::vector<std::string>{"x", "s", "b", "m", "v", "lo", "hi"})
                                 : (std::vector<std::string>{"x", "s", "b", "m", "v"}));
    EXPECT_EQ(fused.outputs, (std::vector<std::string>{"r", "rm", "rv"}));
    EXPECT_EQ(*fused.Get<int64_t>("training_mode", 0), 1);
    EXPECT_EQ(g.values.count("y"), 0u);
    EXPECT_EQ(FuseBatchNormActivations(g), 0) << "nothing left to fuse";
  }
}

TEST(FuseBatchNormActivations, LeavesWhatWouldChangeABit) {
  const Unfusable kVariants[] = {
      {"the normalised values as a graph output", [](Graph& g) { g.outputs.push_back("y"); }},
      {"the normalised values read elsewhere", [](Graph& g) { AddReader(g, "y"); }},
      {"an activation of another value",
       [](Graph& g) {
         g.nodes[1].inputs[0] = "x";
         g.outputs.push_back("y");
       }},
  };
  ExpectNoneFused([] { return ActivatedBatchNormGraph(); }, FuseBatchNormActivations, kVariants);
  const Unfusable kClipVariants[] = {
      {"a bound that trains", [](Graph& g) { g.constants.erase("hi"); }},
      {"a bound computed in the pass",
       [](Graph& g) {
         g.initializers.erase("lo");
         g.constants.erase("lo");
         g.inputs.push_back("lo");
       }},
      {"the values clipped by themselves", [](Graph& g) { g.nodes[1].inputs[2] = "y"; }},
  };
  ExpectNoneFused([] { return ActivatedBatchNormGraph(true); }, FuseBatchNormActivations,
                  kClipVariants);
}

TEST(FuseBatchNormActivations, TrainsToTheTwoNodesBits) {
  Value x = RandomValue({2, 3, 4, 4}, 96), dy = RandomValue({2, 3, 4, 4}, 97);
  x.floats[3] = -0.0f, dy.floats[5] = -0.0f;
  for (const bool clip : {false, true}) {
    SCOPED_TRACE(clip ? "Clip" : "Relu");
    ExpectFusedBitsAsApart(ActivatedBatchNormGraph(clip), FuseBatchNormActivations, "y", x, dy,
                           {"s", "b", "w"});
  }
}

// z = Dropout(Dropout(Softmax(h [* c])) * w) over [2, 3, 8] rows, h = x + p,
// as the attention drops its probabilities (scaled: by the loader's scalar c
// first, Mul(h, c)); ratio 0.25 and training_mode the loader's constants. The
// second Dropout draws after the first, so its mask shows the first's draw.
Graph DroppedSoftmaxGraph(bool scaled, bool training_mode = true) {
  Graph g;
  g.opset = 17;
  ConstantTensor c, ratio, train;
  c.floats = {0.35355338f};
  ratio.floats = {0.25f};
  train.dtype = DType::kBool;
  train.ints = {training_mode ? 1 : 0};
  g.initializers["c"] = c;
  g.initializers["ratio"] = ratio;
  g.initializers["train"] = train;
  g.constants.insert({"c", "ratio", "train"});
  g.values["c"] = {DType::kFloat32, {}};
  g.values["ratio"] = {DType::kFloat32, {}};
  g.values["train"] = {DType::kBool, {}};
  g.initializers["p"] = testing::ToConstant(RandomValue({2, 3, 8}, 81));
  g.initializers["w"] = testing::ToConstant(RandomValue({2, 3, 8}, 82));
  for (const char* name : {"x", "p", "w", "h", "m", "y", "d", "e", "z"}) {
    g.values[name] = {DType::kFloat32, {2, 3, 8}};
  }
  g.inputs = {"x"};
  g.outputs = {"z"};
  g.nodes = {MakeNode("Add", {"x", "p"}, {"h"})};
  if (scaled) {
    g.nodes.push_back(MakeNode("Mul", {"h", "c"}, {"m"}));
    g.nodes.back().name = "/attn/Mul";
  }
  g.nodes.push_back(MakeNode("Softmax", {scaled ? "m" : "h"}, {"y"}, {{"axis", int64_t{-1}}}));
  g.nodes.back().name = "/attn/Softmax";
  g.nodes.push_back(MakeNode("Dropout", {"y", "ratio", "train"}, {"d"}));
  g.nodes.push_back(MakeNode("Mul", {"d", "w"}, {"e"}));
  g.nodes.push_back(MakeNode("Dropout", {"e", "ratio", "train"}, {"z"}));
  return g;
}

TEST(FuseSoftmaxDropouts, TheProbabilitiesDropoutBecomesTheSoftmaxs) {
  for (bool scaled : {false, true}) {
    Graph g = DroppedSoftmaxGraph(scaled);
    if (scaled) {
      ASSERT_EQ(FuseScaledSoftmax(g), 1);
    }
    EXPECT_EQ(FuseSoftmaxDropouts(g), 1);
    EXPECT_EQ(Ops(g), (std::vector<std::string>{"Add", "Softmax+Dropout", "Mul", "Dropout"}));
    const Node& fused = g.nodes[1];
    EXPECT_EQ(fused.name, scaled ? "/attn/Mul+Softmax+Dropout" : "/attn/Softmax+Dropout");
    EXPECT_EQ(fused.inputs, (std::vector<std::string>{"h", "ratio", "train"}));
    EXPECT_EQ(fused.outputs, (std::vector<std::string>{"d", "y"}));
    EXPECT_EQ(*fused.Get<int64_t>("axis", 0), -1);
    EXPECT_EQ(fused.attributes.count("scale"), scaled ? 1u : 0u);
    EXPECT_EQ(g.values.count("y"), 1u) << "the backward reads the probabilities";
    EXPECT_EQ(FuseSoftmaxDropouts(g), 0) << "nothing left to fuse";
  }
  // Absent optional inputs stay absent, an unread mask goes.
  Graph g = DroppedSoftmaxGraph(false);
  g.nodes[2].inputs = {"y"};
  g.nodes[2].outputs = {"d", "mask"};
  g.values["mask"] = {DType::kBool, {2, 3, 8}};
  EXPECT_EQ(FuseSoftmaxDropouts(g), 1);
  EXPECT_EQ(g.nodes[1].inputs, std::vector<std::string>{"h"});
  EXPECT_EQ(g.values.count("mask"), 0u);
}

TEST(FuseSoftmaxDropouts, LeavesWhatWouldChangeABit) {
  const Unfusable kVariants[] = {
      {"the probabilities as a graph output", [](Graph& g) { g.outputs.push_back("y"); }},
      {"the probabilities read elsewhere", [](Graph& g) { AddReader(g, "y"); }},
      {"the mask read",
       [](Graph& g) {
         g.nodes[2].outputs = {"d", "mask"};
         g.values["mask"] = {DType::kBool, {2, 3, 8}};
         g.outputs.push_back("mask");
       }},
      {"a dropout drawing between them",
       [](Graph& g) {
         g.nodes.insert(g.nodes.begin() + 2, MakeNode("Dropout", {"h", "ratio", "train"}, {"q"}));
         g.values["q"] = g.values["h"];
         g.outputs.push_back("q");
       }},
      {"a LogSoftmax", [](Graph& g) { g.nodes[1].op = "LogSoftmax"; }},
  };
  ExpectNoneFused([] { return DroppedSoftmaxGraph(false); }, FuseSoftmaxDropouts, kVariants);
}

TEST(FuseSoftmaxDropouts, TrainsToTheTwoNodesBits) {
  const float inf = std::numeric_limits<float>::infinity();
  Value x = RandomValue({2, 3, 8}, 83), dy = RandomValue({2, 3, 8}, 84);
  x.floats[3] = -0.0f, x.floats[9] = 1e30f, x.floats[17] = -inf, dy.floats[5] = -0.0f;
  for (bool scaled : {false, true}) {
    for (bool training_mode : {true, false}) {
      Graph fused = DroppedSoftmaxGraph(scaled, training_mode);
      Graph apart = DroppedSoftmaxGraph(scaled, training_mode);
      apart.outputs.push_back("y");
      Graph check = fused, check_apart = apart;
      FuseScaledSoftmax(check);
      FuseScaledSoftmax(check_apart);
      ASSERT_EQ(FuseSoftmaxDropouts(check), 1);
      ASSERT_EQ(FuseSoftmaxDropouts(check_apart), 0);
      EXPECT_EQ(RunPass(fused, x, dy, {"p", "w"}), RunPass(apart, x, dy, {"p", "w"}))
          << "scaled " << scaled << " training_mode " << training_mode;
    }
  }
}

// z = h + Dropout(h * w) over [2, 3, 8] as PyTorch exports a residual
// connection, h = x + p; ratio 0.25 and training_mode the loader's constants
// (residual_first: Add(h, d), else Add(d, h)).
Graph ResidualDropoutGraph(bool residual_first, bool training_mode = true) {
  Graph g;
  g.opset = 17;
  ConstantTensor ratio, train;
  ratio.floats = {0.25f};
  train.dtype = DType::kBool;
  train.ints = {training_mode ? 1 : 0};
  g.initializers["ratio"] = ratio;
  g.initializers["train"] = train;
  g.constants.insert({"ratio", "train"});
  g.values["ratio"] = {DType::kFloat32, {}};
  g.values["train"] = {DType::kBool, {}};
  g.initializers["p"] = testing::ToConstant(RandomValue({2, 3, 8}, 71));
  g.initializers["w"] = testing::ToConstant(RandomValue({2, 3, 8}, 72));
  for (const char* name : {"x", "p", "w", "h", "m", "d", "z"}) {
    g.values[name] = {DType::kFloat32, {2, 3, 8}};
  }
  g.inputs = {"x"};
  g.outputs = {"z"};
  g.nodes = {MakeNode("Add", {"x", "p"}, {"h"}), MakeNode("Mul", {"h", "w"}, {"m"}),
             MakeNode("Dropout", {"m", "ratio", "train"}, {"d"}),
             MakeNode("Add",
                      residual_first ? std::vector<std::string>{"h", "d"}
                                     : std::vector<std::string>{"d", "h"},
                      {"z"})};
  g.nodes[2].name = "/drop/Dropout";
  return g;
}

TEST(FuseDropoutAdds, TheResidualsAddBecomesTheDropouts) {
  for (bool residual_first : {false, true}) {
    Graph g = ResidualDropoutGraph(residual_first);
    EXPECT_EQ(FuseDropoutAdds(g), 1);
    EXPECT_EQ(Ops(g), (std::vector<std::string>{"Add", "Mul", "Dropout+Add"}));
    const Node& fused = g.nodes[2];
    EXPECT_EQ(fused.name, "/drop/Dropout+Add");
    EXPECT_EQ(fused.inputs, (std::vector<std::string>{"m", "ratio", "train", "h"}));
    EXPECT_EQ(fused.outputs, std::vector<std::string>{"z"});
    EXPECT_EQ(g.values.count("d"), 0u);
    EXPECT_EQ(FuseDropoutAdds(g), 0) << "nothing left to fuse";
  }
  // Absent optional inputs stay absent, an unread mask goes.
  Graph g = ResidualDropoutGraph(true);
  g.nodes[2].inputs = {"m"};
  g.nodes[2].outputs = {"d", "mask"};
  g.values["mask"] = {DType::kBool, {2, 3, 8}};
  EXPECT_EQ(FuseDropoutAdds(g), 1);
  EXPECT_EQ(g.nodes[2].inputs, (std::vector<std::string>{"m", "", "", "h"}));
  EXPECT_EQ(g.values.count("mask"), 0u);
}

TEST(FuseDropoutAdds, LeavesWhatWouldChangeABit) {
  const Unfusable kVariants[] = {
      {"the dropout's output as a graph output", [](Graph& g) { g.outputs.push_back("d"); }},
      {"the dropout's output read elsewhere", [](Graph& g) { AddReader(g, "d"); }},
      {"the mask read",
       [](Graph& g) {
         g.nodes[2].outputs = {"d", "mask"};
         g.values["mask"] = {DType::kBool, {2, 3, 8}};
         g.outputs.push_back("mask");
       }},
      {"the residual read between the Dropout and the Add", [](Graph& g) { AddReader(g, "h", 3); }},
      {"the residual written after the Dropout",
       [](Graph& g) {
         g.nodes.insert(g.nodes.begin() + 3, MakeNode("Relu", {"h"}, {"q"}));
         g.values["q"] = g.values["h"];
         g.nodes[4].inputs = {"q", "d"};
       }},
      {"a broadcast residual",
       [](Graph& g) {
         g.nodes[3].inputs = {"b", "d"};
         g.initializers["b"] = testing::ToConstant(RandomValue({8}, 73));
         g.values["b"] = {DType::kFloat32, {8}};
       }},
      {"the dropout added to itself",
       [](Graph& g) {
         g.nodes[3].inputs = {"d", "d"};
       }},
  };
  ExpectNoneFused([] { return ResidualDropoutGraph(true); }, FuseDropoutAdds, kVariants);
}

TEST(FuseDropoutAdds, TrainsToTheTwoNodesBits) {
  const Value x = RandomValue({2, 3, 8}, 74), dy = RandomValue({2, 3, 8}, 75);
  for (bool residual_first : {false, true}) {
    for (bool training_mode : {true, false}) {
      Graph fused = ResidualDropoutGraph(residual_first, training_mode);
      Graph apart = ResidualDropoutGraph(residual_first, training_mode);
      apart.outputs.push_back("d");
      Graph check = fused, check_apart = apart;
      ASSERT_EQ(FuseDropoutAdds(check), 1);
      ASSERT_EQ(FuseDropoutAdds(check_apart), 0);
      EXPECT_EQ(RunPass(fused, x, dy, {"p", "w"}), RunPass(apart, x, dy, {"p", "w"}))
          << "residual_first " << residual_first << " training_mode " << training_mode;
    }
  }
}

}  // namespace
}  // namespace easyscale::graph
