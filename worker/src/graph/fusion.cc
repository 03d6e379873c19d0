#include "graph/fusion.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "easyscale/worker/kernel_formulas.h"
#include "graph/ops/elementwise_formulas.h"

namespace easyscale::graph {
namespace {

// What a rewrite needs to know of the graph's values.
class Readers {
 public:
  explicit Readers(const Graph& g) : g_(g), outputs_(g.outputs.begin(), g.outputs.end()) {
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      for (const std::string& in : g.nodes[n].inputs) {
        if (!in.empty()) readers_[in].push_back(n);
      }
      for (const std::string& out : g.nodes[n].outputs) {
        if (!out.empty()) writers_[out] = n;
      }
    }
  }

  // The node that is `value`'s one reader, when it is an `op` node of
  // `inputs` inputs and one output and `value` is no graph output.
  std::optional<size_t> OnlyReader(const std::string& value, const char* op, size_t inputs) const {
    const std::optional<size_t> reader = SoleReader(value);
    if (!reader) return {};
    const Node& node = g_.nodes[*reader];
    if (node.op != op || node.inputs.size() != inputs || node.outputs.size() != 1 ||
        node.outputs[0].empty()) {
      return {};
    }
    return reader;
  }
  // The one node reading `value`, when it is no graph output.
  std::optional<size_t> SoleReader(const std::string& value) const {
    auto it = readers_.find(value);
    if (outputs_.count(value) != 0 || it == readers_.end() || it->second.size() != 1) return {};
    return it->second[0];
  }

  const std::vector<size_t>& Of(const std::string& value) const { return readers_.at(value); }
  // Whether a node reads `value` or it is a graph output.
  bool Read(const std::string& value) const {
    return outputs_.count(value) != 0 || readers_.count(value) != 0;
  }

  // The node that writes `value` (none for inputs and initializers).
  std::optional<size_t> Writer(const std::string& value) const {
    auto it = writers_.find(value);
    if (it == writers_.end()) return {};
    return it->second;
  }

  // The value of `name` where it is a float32 scalar the loader made (never
  // a parameter).
  std::optional<float> ConstantScalar(const std::string& name) const {
    auto it = g_.initializers.find(name);
    if (it == g_.initializers.end() || g_.constants.count(name) == 0 ||
        it->second.dtype != DType::kFloat32 || it->second.floats.size() != 1) {
      return {};
    }
    return it->second.floats[0];
  }
  // Whether `name` is such a scalar holding exactly `want`.
  bool IsConstant(const std::string& name, float want) const {
    const std::optional<float> v = ConstantScalar(name);
    return v && std::bit_cast<uint32_t>(*v) == std::bit_cast<uint32_t>(want);
  }

 private:
  const Graph& g_;
  std::set<std::string> outputs_;
  std::map<std::string, std::vector<size_t>> readers_;  // by value: reading nodes, ascending
  std::map<std::string, size_t> writers_;               // by value: the node writing it
};

// The chain's nodes from its Div, when it is one FuseGeluChains may fuse.
struct GeluChain {
  size_t div, erf, add, mul, half;
};

std::optional<GeluChain> GeluChainAt(const Graph& g, const Readers& r, size_t div) {
  const Node& d = g.nodes[div];
  if (d.op != "Div" || d.inputs.size() != 2 || d.outputs.size() != 1 ||
      !r.IsConstant(d.inputs[1], GeluFormula::kSqrt2)) {
    return {};
  }
  const std::string& x = d.inputs[0];
  auto value = g.values.find(x);
  if (value == g.values.end() || value->second.dtype != DType::kFloat32) return {};
  GeluChain c{div, 0, 0, 0, 0};
  const auto erf = r.OnlyReader(d.outputs[0], "Erf", 1);
  if (!erf) return {};
  c.erf = *erf;
  // The Add's and the last Mul's second input is the constant, so their first
  // is the chain's value (which they alone read).
  const auto add = r.OnlyReader(g.nodes[c.erf].outputs[0], "Add", 2);
  if (!add || !r.IsConstant(g.nodes[*add].inputs[1], 1.0f)) return {};
  c.add = *add;
  const auto mul = r.OnlyReader(g.nodes[c.add].outputs[0], "Mul", 2);
  if (!mul || g.nodes[*mul].inputs[0] != x) return {};
  c.mul = *mul;
  const auto half = r.OnlyReader(g.nodes[c.mul].outputs[0], "Mul", 2);
  if (!half || !r.IsConstant(g.nodes[*half].inputs[1], 0.5f)) return {};
  c.half = *half;
  auto y = g.values.find(g.nodes[c.half].outputs[0]);
  if (y == g.values.end() || y->second.shape != value->second.shape) return {};
  // X's readers: the Div and the Mul first, then only later nodes.
  for (size_t n : r.Of(x)) {
    if (n != c.div && n != c.mul && n < c.mul) return {};
  }
  return c;
}

// Keeps the nodes not dropped, and the values not gone.
void DropNodes(Graph& graph, const std::vector<bool>& dropped,
               const std::vector<std::string>& gone) {
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size());
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!dropped[n]) kept.push_back(std::move(graph.nodes[n]));
  }
  graph.nodes = std::move(kept);
  for (const std::string& value : gone) graph.values.erase(value);
}

// A rewrite that fuses a node with one other: in node order, find(graph,
// readers, n) says whether node n fuses and with which node (the result's
// `partner` member), and rewrite(node n, that node, the result, gone) turns
// node n into the fused node and lists the values that go. The partners are
// dropped; a node whose partner is already dropped stays as it is. Returns
// how many it fused.
template <typename Found, typename Find, typename Rewrite>
int FusePairs(Graph& graph, Find find, size_t Found::*partner, Rewrite rewrite) {
  const Readers readers(graph);
  std::vector<bool> dropped(graph.nodes.size(), false);
  std::vector<std::string> gone;
  int fused = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const std::optional<Found> f = find(graph, readers, n);
    if (!f || dropped[(*f).*partner]) continue;
    const size_t p = (*f).*partner;
    rewrite(graph.nodes[n], graph.nodes[p], *f, gone);
    dropped[p] = true;
    ++fused;
  }
  if (fused > 0) DropNodes(graph, dropped, gone);
  return fused;
}

// The Add of the MatMul at `matmul` and its bias operand (0 or 1), when
// FuseMatMulBiases may fuse them.
struct BiasedMatMul {
  size_t add;
  int bias_operand;
};

std::optional<BiasedMatMul> BiasedMatMulAt(const Graph& g, const Readers& r, size_t matmul) {
  const Node& m = g.nodes[matmul];
  if (m.op != "MatMul" || m.inputs.size() != 2 || m.outputs.size() != 1 || m.outputs[0].empty())
    return {};
  const auto w = g.values.find(m.inputs[1]);
  const auto y = g.values.find(m.outputs[0]);
  if (w == g.values.end() || y == g.values.end() || w->second.shape.size() != 2 ||
      y->second.shape.size() < 2 || y->second.dtype != DType::kFloat32) {
    return {};
  }
  const auto add = r.OnlyReader(m.outputs[0], "Add", 2);
  if (!add) return {};
  const Node& a = g.nodes[*add];
  const int bias_operand = a.inputs[0] == m.outputs[0] ? 1 : 0;
  const std::string& bias = a.inputs[bias_operand];
  if (bias == m.outputs[0]) return {};  // Add(Y, Y)
  const auto init = g.initializers.find(bias);
  const auto info = g.values.find(bias);
  if (init == g.initializers.end() || info == g.values.end() ||
      init->second.dtype != DType::kFloat32 || info->second.dtype != DType::kFloat32 ||
      info->second.shape != Shape{y->second.shape.back()} || r.Of(bias).size() != 1 ||
      std::find(g.inputs.begin(), g.inputs.end(), bias) != g.inputs.end()) {
    return {};
  }
  return BiasedMatMul{*add, bias_operand};
}

// A Transpose's perm over `rank` dimensions (absent: reversed), where it is a
// permutation of them (a bad one is the Transpose's factory's to report).
std::optional<std::vector<int64_t>> TransposePerm(const Node& t, size_t rank) {
  std::vector<int64_t> reversed;
  for (size_t d = rank; d-- > 0;) reversed.push_back(static_cast<int64_t>(d));
  const StatusOr<std::vector<int64_t>> perm = t.Get<std::vector<int64_t>>("perm", reversed);
  if (!perm.ok() || perm->size() != rank) return {};
  std::vector<int64_t> sorted = *perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t d = 0; d < rank; ++d) {
    if (sorted[d] != static_cast<int64_t>(d)) return {};
  }
  return *perm;
}

// The Transpose whose output the product at `product` reads as B, when
// FuseTransposedWeights may fuse them.
struct TransposedWeight {
  size_t transpose;
};

std::optional<TransposedWeight> TransposedWeightOf(const Graph& g, const Readers& r,
                                                   size_t product) {
  const Node& m = g.nodes[product];
  const bool biased = m.op == "MatMul+Add";
  if ((m.op != "MatMul" && !biased) || m.inputs.size() != (biased ? 3u : 2u)) return {};
  const std::string& wt = m.inputs[1];
  if (wt == m.inputs[0] || !r.OnlyReader(wt, m.op.c_str(), m.inputs.size())) return {};
  const std::optional<size_t> transpose = r.Writer(wt);
  if (!transpose) return {};
  const Node& t = g.nodes[*transpose];
  if (t.op != "Transpose" || t.inputs.size() != 1 || t.outputs.size() != 1) return {};
  const auto w = g.values.find(t.inputs[0]);
  if (w == g.values.end() || w->second.dtype != DType::kFloat32 || w->second.shape.size() != 2 ||
      r.Of(t.inputs[0]).size() != 1) {
    return {};
  }
  const std::optional<std::vector<int64_t>> perm = TransposePerm(t, 2);
  if (!perm || *perm != std::vector<int64_t>{1, 0}) return {};
  return TransposedWeight{*transpose};
}

// A Transpose's perm (TransposePerm) where it keeps the matrices' elements a
// unit step apart along their rows or columns: as an operand (the tensor's
// last dimension is the view's last or second last), or as the product's
// output (the product's last or second last dimension is the output's last).
enum class Side { kOperand, kOutput };
std::optional<std::vector<int64_t>> MatrixPerm(const Node& t, size_t rank, Side side) {
  const std::optional<std::vector<int64_t>> perm = TransposePerm(t, rank);
  if (!perm) return {};
  const int64_t last = static_cast<int64_t>(rank) - 1;
  const bool unit_step = side == Side::kOperand
                             ? (*perm)[rank - 1] == last || (*perm)[rank - 2] == last
                             : (*perm)[rank - 1] == last || (*perm)[rank - 1] == last - 1;
  if (!unit_step) return {};
  return *perm;
}

// The Transpose writing operand `value` of the product at `product`, where
// FuseTransposedOperands may read its input in place: the product alone
// reads `value`, which is no graph output, and the Transpose alone reads its
// float32 input (whose gradient is then the product's alone).
std::optional<size_t> OperandTranspose(const Graph& g, const Readers& r, const std::string& value,
                                       size_t product) {
  const std::optional<size_t> t = r.Writer(value);
  if (!t || g.nodes[*t].op != "Transpose" || g.nodes[*t].inputs.size() != 1 ||
      !r.OnlyReader(value, "MatMul", 2) || r.Of(value)[0] != product) {
    return {};
  }
  const std::string& source = g.nodes[*t].inputs[0];
  const auto info = g.values.find(source);
  if (info == g.values.end() || info->second.dtype != DType::kFloat32 || r.Of(source).size() != 1)
    return {};
  return t;
}

// The Reshape writing `value` where FuseTransposedOperands may look through
// it (its output and its input's elements are in the same order): `value`
// is read by one Transpose alone and is no graph output, and the Reshape
// alone reads its float32 input.
std::optional<size_t> ReshapeBefore(const Graph& g, const Readers& r, const std::string& value) {
  const std::optional<size_t> reshape = r.Writer(value);
  if (!reshape || g.nodes[*reshape].op != "Reshape" || g.nodes[*reshape].inputs.empty() ||
      !r.OnlyReader(value, "Transpose", 1)) {
    return {};
  }
  const std::string& data = g.nodes[*reshape].inputs[0];
  const auto info = g.values.find(data);
  if (info == g.values.end() || info->second.dtype != DType::kFloat32 || r.Of(data).size() != 1)
    return {};
  return reshape;
}

std::vector<int64_t> AsInts(const Shape& shape) { return {shape.begin(), shape.end()}; }

// The Softmax after the Mul at `mul` and the Mul's scale, where
// FuseScaledSoftmax may fuse them.
struct ScaledSoftmax {
  size_t softmax;
  int operand;  // the Mul's scaled operand: 0 or 1
  float scale;
};

std::optional<ScaledSoftmax> ScaledSoftmaxAt(const Graph& g, const Readers& r, size_t mul) {
  const Node& m = g.nodes[mul];
  if (m.op != "Mul" || m.inputs.size() != 2 || m.outputs.size() != 1 || m.outputs[0].empty())
    return {};
  for (int operand = 0; operand < 2; ++operand) {
    const std::optional<float> scale = r.ConstantScalar(m.inputs[1 - operand]);
    const auto x = g.values.find(m.inputs[operand]);
    const auto y = g.values.find(m.outputs[0]);
    if (!scale || x == g.values.end() || y == g.values.end() ||
        x->second.dtype != DType::kFloat32 || x->second.shape != y->second.shape) {
      continue;
    }
    const std::optional<size_t> softmax = r.OnlyReader(m.outputs[0], "Softmax", 1);
    if (softmax) return ScaledSoftmax{*softmax, operand, *scale};
  }
  return {};
}

}  // namespace

int FuseScaledSoftmax(Graph& graph) {
  return FusePairs(
      graph, ScaledSoftmaxAt, &ScaledSoftmax::softmax,
      [](Node& mul, const Node& softmax, const ScaledSoftmax& f, std::vector<std::string>& gone) {
        gone.push_back(mul.outputs[0]);  // the scaled values
        Node fused_node;
        fused_node.name = mul.name + "+Softmax";
        fused_node.op = "Mul+Softmax";
        fused_node.inputs = {mul.inputs[f.operand]};
        fused_node.outputs = softmax.outputs;
        fused_node.attributes = softmax.attributes;  // its axis
        fused_node.attributes["scale"] = f.scale;
        mul = std::move(fused_node);
      });
}

namespace {

// Whether `d` is a Dropout whose output alone is read (its mask is not).
bool DropsAlone(const Node& d, const Readers& r) {
  if (d.op != "Dropout" || d.inputs.empty() || d.inputs.size() > 3 || d.outputs.empty() ||
      d.outputs.size() > 2 || d.outputs[0].empty()) {
    return false;
  }
  return d.outputs.size() == 1 || d.outputs[1].empty() || !r.Read(d.outputs[1]);
}

// A fused Dropout's unread mask (DropsAlone), which goes.
void UnreadMaskGoes(const Node& dropout, std::vector<std::string>& gone) {
  if (dropout.outputs.size() == 2 && !dropout.outputs[1].empty())
    gone.push_back(dropout.outputs[1]);
}

// The Add reading the Dropout at `dropout` and its residual operand (0 or 1),
// when FuseDropoutAdds may fuse them.
struct ResidualDropout {
  size_t add;
  int residual_operand;
};

std::optional<ResidualDropout> ResidualDropoutAt(const Graph& g, const Readers& r, size_t dropout) {
  const Node& d = g.nodes[dropout];
  if (!DropsAlone(d, r)) return {};
  const std::optional<size_t> add = r.OnlyReader(d.outputs[0], "Add", 2);
  if (!add) return {};
  const Node& a = g.nodes[*add];
  const int residual_operand = a.inputs[0] == d.outputs[0] ? 1 : 0;
  const std::string& residual = a.inputs[residual_operand];
  if (residual == d.outputs[0]) return {};
  const auto p = g.values.find(residual), y = g.values.find(d.outputs[0]);
  const auto z = g.values.find(a.outputs[0]);
  if (p == g.values.end() || y == g.values.end() || z == g.values.end() ||
      p->second.dtype != DType::kFloat32 || y->second.dtype != DType::kFloat32 ||
      p->second.shape != y->second.shape || z->second.shape != y->second.shape) {
    return {};
  }
  const std::optional<size_t> writer = r.Writer(residual);
  if (writer && *writer > dropout) return {};
  for (size_t reader : r.Of(residual)) {
    if (reader > dropout && reader < *add) return {};
  }
  return ResidualDropout{*add, residual_operand};
}

}  // namespace

int FuseDropoutAdds(Graph& graph) {
  return FusePairs(
      graph, ResidualDropoutAt, &ResidualDropout::add,
      [](Node& dropout, const Node& add, const ResidualDropout& f, std::vector<std::string>& gone) {
        gone.push_back(dropout.outputs[0]);  // the dropped values
        UnreadMaskGoes(dropout, gone);
        Node fused_node;
        fused_node.name = dropout.name + "+Add";
        fused_node.op = "Dropout+Add";
        fused_node.inputs = dropout.inputs;
        fused_node.inputs.resize(3);  // absent ratio and training_mode stay ""
        fused_node.inputs.push_back(add.inputs[f.residual_operand]);
        fused_node.outputs = add.outputs;
        fused_node.attributes = dropout.attributes;  // its ratio before opset 12
        dropout = std::move(fused_node);
      });
}

namespace {

// The Relu or Clip reading the BatchNormalization at `batch_norm`, when
// FuseBatchNormActivations may fuse them.
struct ActivatedBatchNorm {
  size_t activation;
};

std::optional<ActivatedBatchNorm> ActivatedBatchNormAt(const Graph& g, const Readers& r,
                                                       size_t batch_norm) {
  const Node& b = g.nodes[batch_norm];
  if (b.op != "BatchNormalization" || b.outputs.empty() || b.outputs[0].empty()) return {};
  const std::string& y = b.outputs[0];
  const std::optional<size_t> reader = r.SoleReader(y);
  if (!reader) return {};
  const Node& a = g.nodes[*reader];
  if (a.outputs.size() != 1 || a.outputs[0].empty() || a.inputs.empty() || a.inputs[0] != y)
    return {};
  if (a.op == "Clip") {
    // Bounds the loader made (or absent): the fused op takes them at load time.
    for (size_t k = 1; k < a.inputs.size(); ++k) {
      if (!a.inputs[k].empty() && !r.ConstantScalar(a.inputs[k])) return {};
    }
  } else if (a.op != "Relu" || a.inputs.size() != 1) {
    return {};
  }
  const auto yv = g.values.find(y);
  const auto z = g.values.find(a.outputs[0]);
  if (yv == g.values.end() || z == g.values.end() || yv->second.dtype != DType::kFloat32 ||
      z->second.shape != yv->second.shape) {
    return {};
  }
  return ActivatedBatchNorm{*reader};
}

}  // namespace

int FuseBatchNormActivations(Graph& graph) {
  return FusePairs(graph, ActivatedBatchNormAt, &ActivatedBatchNorm::activation,
                   [](Node& batch_norm, const Node& activation, const ActivatedBatchNorm&,
                      std::vector<std::string>& gone) {
                     gone.push_back(batch_norm.outputs[0]);
                     batch_norm.name += "+" + activation.op;
                     batch_norm.op += "+" + activation.op;
                     batch_norm.outputs[0] = activation.outputs[0];
                     if (activation.op != "Clip") return;
                     // The bounds as inputs 5 and 6, or attributes before opset 11.
                     batch_norm.inputs.resize(5);
                     batch_norm.inputs.insert(batch_norm.inputs.end(),
                                              activation.inputs.begin() + 1,
                                              activation.inputs.end());
                     for (const char* bound : {"min", "max"}) {
                       const auto it = activation.attributes.find(bound);
                       if (it != activation.attributes.end())
                         batch_norm.attributes[bound] = it->second;
                     }
                   });
}

namespace {

// The Dropout reading the Softmax (or Mul+Softmax) at `softmax`, when
// FuseSoftmaxDropouts may fuse them.
struct DroppedSoftmax {
  size_t dropout;
};

std::optional<DroppedSoftmax> DroppedSoftmaxAt(const Graph& g, const Readers& r, size_t softmax) {
  const Node& s = g.nodes[softmax];
  if ((s.op != "Softmax" && s.op != "Mul+Softmax") || s.inputs.size() != 1 ||
      s.outputs.size() != 1 || s.outputs[0].empty()) {
    return {};
  }
  const std::string& y = s.outputs[0];
  const std::optional<size_t> dropout = r.SoleReader(y);
  if (!dropout) return {};
  const Node& d = g.nodes[*dropout];
  if (!DropsAlone(d, r) || d.inputs[0] != y || std::count(d.inputs.begin(), d.inputs.end(), y) != 1)
    return {};
  const auto info = g.values.find(y);
  if (info == g.values.end() || info->second.dtype != DType::kFloat32) return {};
  // The Dropout draws at the Softmax's place: no node between draws.
  for (size_t n = softmax + 1; n < *dropout; ++n) {
    if (g.nodes[n].op == "Dropout" || g.nodes[n].op == "Dropout+Add" ||
        g.nodes[n].op == "Softmax+Dropout") {
      return {};
    }
  }
  return DroppedSoftmax{*dropout};
}

}  // namespace

int FuseSoftmaxDropouts(Graph& graph) {
  return FusePairs(graph, DroppedSoftmaxAt, &DroppedSoftmax::dropout,
                   [](Node& softmax, const Node& dropout, const DroppedSoftmax&,
                      std::vector<std::string>& gone) {
                     UnreadMaskGoes(dropout, gone);
                     Node fused_node;
                     fused_node.name = softmax.name + "+Dropout";
                     fused_node.op = "Softmax+Dropout";
                     fused_node.inputs = dropout.inputs;
                     fused_node.inputs[0] = softmax.inputs[0];
                     fused_node.outputs = {dropout.outputs[0], softmax.outputs[0]};
                     fused_node.attributes = softmax.attributes;           // its axis and scale
                     const auto ratio = dropout.attributes.find("ratio");  // before opset 12
                     if (ratio != dropout.attributes.end())
                       fused_node.attributes["ratio"] = ratio->second;
                     softmax = std::move(fused_node);
                   });
}

int FuseTransposedOperands(Graph& graph) {
  const Readers readers(graph);
  std::vector<bool> dropped(graph.nodes.size(), false);
  std::vector<std::string> gone;  // the transposes' outputs, or the products'
  int fused = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    Node& m = graph.nodes[n];
    if (m.op != "MatMul" || m.inputs.size() != 2 || m.outputs.size() != 1 || m.outputs[0].empty())
      continue;
    const auto a = graph.values.find(m.inputs[0]), b = graph.values.find(m.inputs[1]);
    const auto y = graph.values.find(m.outputs[0]);
    if (a == graph.values.end() || b == graph.values.end() || y == graph.values.end()) continue;
    const Shape &as = a->second.shape, &bs = b->second.shape;
    const size_t rank = as.size();
    // Batched, rank 3 or 4, no batch broadcast, M, K and N each at most a
    // k block and at most 65535 heads: the forward's and both gradients'
    // products as cuda::GemmBatchedStrided runs them (one k block, a grid's z).
    if (rank < 3 || rank > 4 || bs.size() != rank ||
        !std::equal(as.begin(), as.end() - 2, bs.begin()) ||
        std::max({as[rank - 2], as[rank - 1], bs[rank - 1]}) > formulas::kGemmKBlock ||
        (rank == 4 && as[1] > 65535)) {
      continue;
    }
    Node strided = m;
    bool any = false;
    for (int i = 0; i < 2; ++i) {
      const std::string& operand = m.inputs[i];
      const std::optional<size_t> t = OperandTranspose(graph, readers, operand, n);
      if (!t || dropped[*t]) continue;
      const std::optional<std::vector<int64_t>> perm =
          MatrixPerm(graph.nodes[*t], rank, Side::kOperand);
      if (!perm) continue;
      strided.attributes[i == 0 ? "perm_a" : "perm_b"] = *perm;
      std::string source = graph.nodes[*t].inputs[0];
      // The heads split from a projection's rows: its Reshape read in place too.
      if (const std::optional<size_t> reshape = ReshapeBefore(graph, readers, source);
          reshape && !dropped[*reshape]) {
        strided.attributes[i == 0 ? "shape_a" : "shape_b"] = AsInts(graph.values.at(source).shape);
        gone.push_back(source);
        dropped[*reshape] = true;
        source = graph.nodes[*reshape].inputs[0];
      }
      strided.inputs[i] = source;
      gone.push_back(operand);
      dropped[*t] = true;
      any = true;
    }
    // The output's Transpose: the product writes its output in place.
    const std::optional<size_t> out = readers.OnlyReader(m.outputs[0], "Transpose", 1);
    if (out && !dropped[*out]) {
      if (const std::optional<std::vector<int64_t>> perm =
              MatrixPerm(graph.nodes[*out], rank, Side::kOutput)) {
        strided.attributes["perm_y"] = *perm;
        gone.push_back(m.outputs[0]);
        strided.outputs = graph.nodes[*out].outputs;
        dropped[*out] = true;
        any = true;
        // The heads merged into rows: written under the Reshape's shape.
        const std::string& merged = strided.outputs[0];
        if (const std::optional<size_t> reshape = readers.OnlyReader(merged, "Reshape", 2);
            reshape && !dropped[*reshape] && graph.nodes[*reshape].inputs[0] == merged) {
          strided.attributes["shape_y"] =
              AsInts(graph.values.at(graph.nodes[*reshape].outputs[0]).shape);
          gone.push_back(merged);
          strided.outputs = graph.nodes[*reshape].outputs;
          dropped[*reshape] = true;
        }
      }
    }
    if (!any) continue;
    strided.op = "StridedMatMul";
    m = std::move(strided);
    ++fused;
  }
  if (fused > 0) DropNodes(graph, dropped, gone);
  return fused;
}

int FuseTransposedWeights(Graph& graph) {
  return FusePairs(graph, TransposedWeightOf, &TransposedWeight::transpose,
                   [](Node& product, const Node& transpose, const TransposedWeight&,
                      std::vector<std::string>& gone) {
                     gone.push_back(product.inputs[1]);  // the weight's transpose
                     product.inputs[1] = transpose.inputs[0];
                     product.op = "Transpose+" + product.op;
                     product.name = transpose.name + "+" + product.name;
                   });
}

int FuseMatMulBiases(Graph& graph) {
  return FusePairs(
      graph, BiasedMatMulAt, &BiasedMatMul::add,
      [](Node& matmul, const Node& add, const BiasedMatMul& f, std::vector<std::string>& gone) {
        gone.push_back(matmul.outputs[0]);  // the product before its bias
        Node fused_node;
        fused_node.name = matmul.name + "+Add";
        fused_node.op = "MatMul+Add";
        fused_node.inputs = {matmul.inputs[0], matmul.inputs[1], add.inputs[f.bias_operand]};
        fused_node.outputs = {add.outputs[0]};
        fused_node.attributes["bias_first"] = int64_t{f.bias_operand == 0 ? 1 : 0};
        matmul = std::move(fused_node);
      });
}

int FuseGeluChains(Graph& graph) {
  const Readers readers(graph);
  std::vector<bool> dropped(graph.nodes.size(), false);
  std::vector<std::string> gone;  // the chains' inner values
  int fused = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const std::optional<GeluChain> c = GeluChainAt(graph, readers, n);
    if (!c || dropped[c->erf] || dropped[c->add] || dropped[c->mul] || dropped[c->half]) continue;
    Node& div = graph.nodes[c->div];
    for (size_t inner : {c->div, c->erf, c->add, c->mul}) {
      gone.push_back(graph.nodes[inner].outputs[0]);
    }
    Node gelu;
    gelu.name = div.name + "+Gelu";
    gelu.op = "Gelu";
    gelu.inputs = {div.inputs[0]};
    gelu.outputs = {graph.nodes[c->half].outputs[0]};
    div = std::move(gelu);
    for (size_t inner : {c->erf, c->add, c->mul, c->half}) dropped[inner] = true;
    ++fused;
  }
  if (fused > 0) DropNodes(graph, dropped, gone);
  return fused;
}

}  // namespace easyscale::graph
