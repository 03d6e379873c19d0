// Loading an ONNX model: parse and check the file, convert initializers and
// attributes, fix the data inputs' shapes, infer every value's dtype and shape
// through the ops' factories, and evaluate at load time what only depends on
// constants the loader knows (Constant and Shape nodes, and the int64 shape
// computations after them), so the graph keeps no shape work for run time.
#include <algorithm>
#include <array>
#include <exception>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/worker/graph.h"
#include "graph/onnx_file.h"
#include "graph/onnx_tensor.h"
#include "graph/op.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"

namespace easyscale::graph {
namespace {

// Protobuf parses no message of 2 GiB or more.
constexpr size_t kMaxModelBytes = std::numeric_limits<int>::max();

// The default-domain opsets PyTorch's training-mode export uses and the ops
// implement; older opsets carry attributes where these have inputs (Squeeze's
// axes, Split's sizes, ...), which the ops do not read.
constexpr int64_t kMinOpset = 11;
constexpr int64_t kMaxOpset = 17;

// Ops not evaluated at load time even when every input is known: their
// results are random, drawn from the EST's stream at run time.
constexpr std::array<std::string_view, 7> kNeverFolded = {
    "Bernoulli",     "Dropout",          "Multinomial",      "RandomNormal",
    "RandomUniform", "RandomNormalLike", "RandomUniformLike"};

// The ONNX checker's messages span lines; errors here are one line.
std::string OneLine(absl::string_view text) {
  std::string line;
  bool space = false;
  for (char ch : text) {
    if (ch == '\n' || ch == '\r' || ch == ' ' || ch == '\t') {
      space = !line.empty();
      continue;
    }
    if (space) line += ' ';
    space = false;
    line += ch;
  }
  return line;
}

std::string ShapeString(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

std::string NodeName(const onnx::NodeProto& node, size_t index) {
  return node.name().empty() ? absl::StrCat(node.op_type(), "_", index) : node.name();
}

// Every name a node reads exists before it: the messages name what is wrong,
// where the checker only says the nodes are not sorted.
Status CheckReferences(const onnx::GraphProto& g) {
  std::set<std::string> known;
  for (const auto& in : g.input()) known.insert(in.name());
  for (const auto& init : g.initializer()) known.insert(init.name());
  std::map<std::string, size_t> producer;
  for (int i = 0; i < g.node_size(); ++i) {
    for (const std::string& out : g.node(i).output()) producer.emplace(out, i);
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& node = g.node(i);
    for (const std::string& in : node.input()) {
      if (in.empty() || known.count(in) != 0) continue;
      auto p = producer.find(in);
      if (p != producer.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node ", NodeName(node, i), " reads ", in, " before node ",
                         NodeName(g.node(p->second), p->second),
                         " computes it: the nodes are not in topological order"));
      }
      return absl::InvalidArgumentError(absl::StrCat("node ", NodeName(node, i), " reads ", in,
                                                     ", which no initializer, input or earlier "
                                                     "node provides"));
    }
    for (const std::string& out : node.output()) known.insert(out);
  }
  for (const auto& out : g.output()) {
    if (known.count(out.name()) == 0) {
      return absl::InvalidArgumentError("graph output " + out.name() +
                                        " is no input, initializer or node output");
    }
  }
  return absl::OkStatus();
}

}  // namespace

Status InFile(const std::string& path, const Status& s) {
  return Status(s.code(), absl::StrCat(path, ": ", OneLine(s.message())));
}

StatusOr<onnx::ModelProto> ParseModel(const std::string& bytes) {
  onnx::ModelProto model;
  // Bytes that are not a protobuf fail to parse; a file cut at a field
  // boundary may parse but lacks the graph or fails the checker.
  if (!model.ParseFromString(bytes) || !model.has_graph() || !model.has_ir_version()) {
    return absl::InvalidArgumentError(
        "not an ONNX model, or truncated: it does not parse as a ModelProto with a graph");
  }
  ES_RETURN_IF_ERROR(CheckReferences(model.graph()));
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the ONNX checker refuses it: ", e.what()));
  }
  return model;
}

namespace {

StatusOr<int64_t> DefaultOpset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import()) {
    if (!o.domain().empty() && o.domain() != "ai.onnx") continue;
    if (o.version() < kMinOpset || o.version() > kMaxOpset) {
      return absl::InvalidArgumentError(absl::StrCat("default-domain opset ", o.version(),
                                                     " is not supported (opsets ", kMinOpset,
                                                     " to ", kMaxOpset, " are)"));
    }
    return o.version();
  }
  return absl::InvalidArgumentError("the model imports no opset of the default ONNX domain");
}

StatusOr<Attribute> ConvertAttribute(const onnx::AttributeProto& a) {
  switch (a.type()) {
    case onnx::AttributeProto::INT:
      return Attribute(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::FLOAT:
      return Attribute(a.f());
    case onnx::AttributeProto::STRING:
      return Attribute(a.s());
    case onnx::AttributeProto::INTS:
      return Attribute(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto::FLOATS:
      return Attribute(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto::TENSOR: {
      auto t = FromTensorProto(a.t());
      if (!t.ok()) return absl::InvalidArgumentError(std::string(t.status().message()));
      return Attribute(std::move(*t));
    }
    case onnx::AttributeProto::GRAPH:
    case onnx::AttributeProto::GRAPHS:
      return absl::InvalidArgumentError("graph-valued (control flow) attributes are not supported");
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          onnx::AttributeProto::AttributeType_Name(a.type()), " attributes are not supported"));
  }
}

StatusOr<Node> ConvertNode(const onnx::NodeProto& proto, size_t index) {
  Node node;
  node.name = NodeName(proto, index);
  node.op = proto.op_type();
  if (!proto.domain().empty() && proto.domain() != "ai.onnx") {
    return absl::InvalidArgumentError(absl::StrCat("node ", node.name, ": operator ", node.op,
                                                   " of domain ", proto.domain(),
                                                   " is not supported (only ONNX's default "
                                                   "domain is)"));
  }
  node.inputs.assign(proto.input().begin(), proto.input().end());
  node.outputs.assign(proto.output().begin(), proto.output().end());
  for (const onnx::AttributeProto& a : proto.attribute()) {
    auto value = ConvertAttribute(a);
    if (!value.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("node ", node.name, " (", node.op,
                                                     "): attribute ", a.name(), ": ",
                                                     value.status().message()));
    }
    node.attributes.emplace(a.name(), std::move(*value));
  }
  return node;
}

// Declares data input `in` with its shape from `input_shapes`, checked against
// the model's declared type.
Status AddDataInput(const onnx::ValueInfoProto& in,
                    const std::map<std::string, Shape>& input_shapes, Graph& g) {
  const std::string& name = in.name();
  if (!in.type().has_tensor_type()) {
    return absl::InvalidArgumentError("input " + name + " is not a tensor");
  }
  const onnx::TypeProto::Tensor& type = in.type().tensor_type();
  DType dtype;
  switch (type.elem_type()) {
    case onnx::TensorProto::FLOAT:
      dtype = DType::kFloat32;
      break;
    case onnx::TensorProto::INT64:
      dtype = DType::kInt64;
      break;
    case onnx::TensorProto::BOOL:
      dtype = DType::kBool;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("input ", name, ": data type ",
                                                     DataTypeName(type.elem_type()),
                                                     " is not supported (FLOAT, INT64 and BOOL "
                                                     "are)"));
  }
  auto it = input_shapes.find(name);
  if (it == input_shapes.end()) {
    return absl::InvalidArgumentError("input " + name + " has no shape in input_shapes");
  }
  const Shape& shape = it->second;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError("input " + name + ": shape " + ShapeString(shape) +
                                        " has a negative dimension");
    }
  }
  if (type.has_shape()) {
    const auto& dims = type.shape().dim();
    if (static_cast<size_t>(dims.size()) != shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat("input ", name, " has rank ", dims.size(),
                                                     " in the model, the data gives ",
                                                     ShapeString(shape)));
    }
    for (int i = 0; i < dims.size(); ++i) {
      if (dims[i].has_dim_value() && dims[i].dim_value() != shape[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("input ", name, ": dimension ", i, " is ", dims[i].dim_value(),
                         " in the model, the data gives ", ShapeString(shape)));
      }
    }
  }
  g.inputs.push_back(name);
  g.values[name] = {dtype, shape};
  return absl::OkStatus();
}

void AddConstant(const std::string& name, ConstantTensor c, Graph& g) {
  g.values[name] = {c.dtype, c.shape};
  g.initializers[name] = std::move(c);
  g.constants.insert(name);
}

Status FoldConstantNode(const Node& node, Graph& g) {
  if (node.attributes.size() != 1) {
    return absl::InvalidArgumentError("node " + node.name +
                                      " (Constant): needs exactly one value attribute");
  }
  const auto& [key, attr] = *node.attributes.begin();
  ConstantTensor c;
  if (const auto* t = std::get_if<ConstantTensor>(&attr); t && key == "value") {
    c = *t;
  } else if (const auto* f = std::get_if<float>(&attr); f && key == "value_float") {
    c = {DType::kFloat32, {}, {*f}, {}};
  } else if (const auto* fs = std::get_if<std::vector<float>>(&attr); fs && key == "value_floats") {
    c = {DType::kFloat32, {static_cast<int64_t>(fs->size())}, *fs, {}};
  } else if (const auto* i = std::get_if<int64_t>(&attr); i && key == "value_int") {
    c = {DType::kInt64, {}, {}, {*i}};
  } else if (const auto* is = std::get_if<std::vector<int64_t>>(&attr); is && key == "value_ints") {
    c = {DType::kInt64, {static_cast<int64_t>(is->size())}, {}, *is};
  } else {
    return absl::InvalidArgumentError("node " + node.name + " (Constant): attribute " + key +
                                      " is not supported (value, value_float(s) and "
                                      "value_int(s) are)");
  }
  AddConstant(node.outputs[0], std::move(c), g);
  return absl::OkStatus();
}

// Shape of a value whose shape the loader knows (all of them), with opset
// 15's start and end: negative counts from the back, both clamped to the rank.
Status FoldShapeNode(const Node& node, Graph& g) {
  const Shape& in = g.values.at(node.inputs[0]).shape;
  const auto rank = static_cast<int64_t>(in.size());
  ES_ASSIGN_OR_RETURN(int64_t start, node.Get<int64_t>("start", 0));
  ES_ASSIGN_OR_RETURN(int64_t end, node.Get<int64_t>("end", rank));
  auto clamp = [rank](int64_t a) { return std::clamp<int64_t>(a < 0 ? a + rank : a, 0, rank); };
  start = clamp(start);
  end = std::max(start, clamp(end));
  AddConstant(node.outputs[0],
              {DType::kInt64,
               {end - start},
               {},
               std::vector<int64_t>(in.begin() + start, in.begin() + end)},
              g);
  return absl::OkStatus();
}

// Builds the node's op (its outputs' infos go into g.values), and evaluates it
// now when every input is a constant the loader knows; otherwise the node is
// kept. Float initializers of the file are not such constants: they may be
// parameters, which training changes.
Status AddNode(Node node, Graph& g) {
  if (node.op == "Constant") return FoldConstantNode(node, g);
  if (node.op == "Shape") return FoldShapeNode(node, g);
  bool known = !node.inputs.empty() &&
               std::find(kNeverFolded.begin(), kNeverFolded.end(), node.op) == kNeverFolded.end();
  std::vector<OpInput> inputs;
  for (const std::string& name : node.inputs) {
    if (name.empty()) {
      inputs.emplace_back();
      continue;
    }
    auto c = g.initializers.find(name);
    const ConstantTensor* constant = c == g.initializers.end() ? nullptr : &c->second;
    inputs.push_back({&g.values.at(name), constant});
    known = known && constant != nullptr &&
            (g.constants.count(name) != 0 || constant->dtype != DType::kFloat32);
  }
  ES_ASSIGN_OR_RETURN(std::unique_ptr<Op> op, MakeOp(node, g.opset, inputs));
  const std::vector<ValueInfo> infos = op->OutputInfos();
  if (node.outputs.size() > infos.size()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", node.name, " (", node.op, ") names ",
                                                   node.outputs.size(), " outputs, the op has ",
                                                   infos.size()));
  }
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    if (!node.outputs[o].empty()) g.values[node.outputs[o]] = infos[o];
  }
  if (!known) {
    g.nodes.push_back(std::move(node));
    return absl::OkStatus();
  }
  std::vector<Value> in_values(node.inputs.size()), out_values(node.outputs.size());
  std::vector<const Value*> in;
  std::vector<Value*> out;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i].empty()) {
      in.push_back(nullptr);
      continue;
    }
    const ConstantTensor& c = g.initializers.at(node.inputs[i]);
    in_values[i] = {c.dtype, c.shape, c.floats, c.ints};
    in.push_back(&in_values[i]);
  }
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    if (node.outputs[o].empty()) {
      out.push_back(nullptr);
      continue;
    }
    out_values[o].Reset(infos[o].dtype, infos[o].shape);
    out.push_back(&out_values[o]);
  }
  RunContext ctx;
  ctx.training = false;
  uint64_t dropout_counter = 0;
  ctx.dropout_counter = &dropout_counter;
  op->Forward(ctx, in, out);
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    Value& v = out_values[o];
    if (!node.outputs[o].empty()) {
      AddConstant(node.outputs[o],
                  {v.dtype, std::move(v.shape), std::move(v.floats), std::move(v.ints)}, g);
    }
  }
  return absl::OkStatus();
}

// Drops the initializers and values nothing reads any more (what folded nodes
// read); data inputs, graph outputs and kept nodes' outputs stay.
void Prune(Graph& g) {
  std::set<std::string> read(g.outputs.begin(), g.outputs.end());
  for (const Node& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  std::erase_if(g.initializers, [&](const auto& kv) { return read.count(kv.first) == 0; });
  std::erase_if(g.constants, [&](const std::string& name) { return read.count(name) == 0; });
  std::set<std::string> keep = read;
  keep.insert(g.inputs.begin(), g.inputs.end());
  for (const Node& n : g.nodes) keep.insert(n.outputs.begin(), n.outputs.end());
  std::erase_if(g.values, [&](const auto& kv) { return keep.count(kv.first) == 0; });
}

StatusOr<Graph> Load(const std::string& bytes, const std::map<std::string, Shape>& input_shapes) {
  ES_ASSIGN_OR_RETURN(const onnx::ModelProto model, ParseModel(bytes));
  Graph g;
  ES_ASSIGN_OR_RETURN(g.opset, DefaultOpset(model));
  const onnx::GraphProto& proto = model.graph();
  if (proto.sparse_initializer_size() != 0) {
    return absl::InvalidArgumentError("sparse initializers are not supported");
  }
  for (const onnx::TensorProto& init : proto.initializer()) {
    auto c = FromTensorProto(init);
    if (!c.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("initializer ", init.name(), ": ", c.status().message()));
    }
    g.values[init.name()] = {c->dtype, c->shape};
    g.initializers[init.name()] = std::move(*c);
  }
  // Older exporters list initializers among the inputs too; those are no data.
  for (const onnx::ValueInfoProto& in : proto.input()) {
    if (g.initializers.count(in.name()) == 0) ES_RETURN_IF_ERROR(AddDataInput(in, input_shapes, g));
  }
  for (const auto& [name, shape] : input_shapes) {
    if (std::find(g.inputs.begin(), g.inputs.end(), name) == g.inputs.end()) {
      return absl::InvalidArgumentError("input_shapes names " + name +
                                        ", which is not a data input of the model");
    }
  }
  for (const onnx::ValueInfoProto& out : proto.output()) g.outputs.push_back(out.name());
  for (int i = 0; i < proto.node_size(); ++i) {
    ES_ASSIGN_OR_RETURN(Node node, ConvertNode(proto.node(i), static_cast<size_t>(i)));
    ES_RETURN_IF_ERROR(AddNode(std::move(node), g));
  }
  Prune(g);
  return g;
}

}  // namespace

StatusOr<Graph> LoadOnnxModel(const std::string& path,
                              const std::map<std::string, Shape>& input_shapes) {
  ES_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path, kMaxModelBytes));  // names path
  StatusOr<Graph> g = Load(bytes, input_shapes);
  if (!g.ok()) return InFile(path, g.status());
  return g;
}

StatusOr<std::vector<DataInput>> OnnxDataInputs(const std::string& path) {
  ES_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path, kMaxModelBytes));
  StatusOr<onnx::ModelProto> model = ParseModel(bytes);
  if (!model.ok()) return InFile(path, model.status());
  std::set<std::string> initializers;
  for (const auto& init : model->graph().initializer()) initializers.insert(init.name());
  std::vector<DataInput> inputs;
  for (const auto& in : model->graph().input()) {
    if (initializers.count(in.name()) != 0) continue;
    const bool ranked = in.type().has_tensor_type() && in.type().tensor_type().has_shape();
    DataInput& input = inputs.emplace_back();
    input.name = in.name();
    if (!ranked) continue;
    input.rank = in.type().tensor_type().shape().dim_size();
    for (const auto& d : in.type().tensor_type().shape().dim()) {
      input.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
  }
  return inputs;
}

}  // namespace easyscale::graph
