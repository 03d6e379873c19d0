// File: easyscale/worker/graph.h
//
// A model as a graph of operators: what a PyTorch model exported to ONNX
// (training mode, opsets 13 to 17) is once loaded. Every value has a static
// dtype and shape: the loader fixes the batch dimension to the micro-batch and
// evaluates the int64 shape computations (Shape, Gather, Concat, ...) itself,
// so nothing about shapes is left for run time. Nodes are in topological order.
//
//   StatusOr<Graph> g = LoadOnnxModel("resnet18.onnx", {{"input", {16, 1, 28, 28}}});
//   for (const Node& n : g->nodes) ...   // n.op: "Conv", "Relu", ...
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale::graph {

// Training computes in float32; int64 carries indices and shapes; bool masks.
enum class DType { kFloat32, kInt64, kBool };
const char* ToString(DType t);

using Shape = std::vector<int64_t>;
int64_t NumElements(const Shape& s);

struct ValueInfo {
  DType dtype = DType::kFloat32;
  Shape shape;
};

// A constant tensor: an initializer, a Constant node's value, or a shape the
// loader computed. Exactly one of the vectors holds the elements (bool as 0/1
// int64), row-major.
struct ConstantTensor {
  DType dtype = DType::kFloat32;
  Shape shape;
  std::vector<float> floats;
  std::vector<int64_t> ints;
};

// An operator attribute, as ONNX has them (graph-valued ones are refused).
using Attribute = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, ConstantTensor>;

struct Node {
  std::string name;                  // the ONNX node's name, or "<op>_<index>" when it has none
  std::string op;                    // ONNX op_type, default domain only
  std::vector<std::string> inputs;   // "" for an omitted optional input
  std::vector<std::string> outputs;  // "" for an omitted optional output
  std::map<std::string, Attribute> attributes;

  // The attribute of `key` as T, or `fallback` when absent. A present
  // attribute of another type is an error naming the node and the attribute.
  template <typename T>
  StatusOr<T> Get(const std::string& key, T fallback) const;
};

struct Graph {
  int64_t opset = 0;                                   // of the default domain
  std::vector<Node> nodes;                             // topological order
  std::map<std::string, ConstantTensor> initializers;  // weights, buffers, constants
  // Initializers the loader made (Constant nodes, folded shape computations):
  // never parameters, whatever reads them.
  std::set<std::string> constants;
  std::vector<std::string> inputs;          // fed from data, in order
  std::vector<std::string> outputs;         // in order
  std::map<std::string, ValueInfo> values;  // every value: inputs, initializers, node outputs
};

// Reads an ONNX model file (checked with ONNX's checker), keeps the default
// domain's operators, fixes each graph input's shape to `input_shapes` (which
// must name every input that is not an initializer and agree with its
// declared rank and fixed dimensions), folds Constant nodes and every int64
// shape computation into initializers, and infers every value's dtype and
// shape. Errors are one line naming the file and what is wrong: not an ONNX
// file or truncated, an unsupported operator (its node, op and opset, see
// SupportedOps), a shape that cannot be resolved (its node), an initializer a
// node needs that the file lacks, an input shape that does not fit.
StatusOr<Graph> LoadOnnxModel(const std::string& path,
                              const std::map<std::string, Shape>& input_shapes);

// A data input of an ONNX model file (a graph input that is not an
// initializer): its name, its declared rank (-1 when the file leaves it open)
// and dimensions (-1 for each one it leaves open).
struct DataInput {
  std::string name;
  int64_t rank = -1;
  std::vector<int64_t> dims;
};
// The file's data inputs in order, for LoadOnnxModel's `input_shapes`.
StatusOr<std::vector<DataInput>> OnnxDataInputs(const std::string& path);

// The operators a graph may use (ONNX op_type names).
const std::vector<std::string>& SupportedOps();

template <typename T>
StatusOr<T> Node::Get(const std::string& key, T fallback) const {
  auto it = attributes.find(key);
  if (it == attributes.end()) return fallback;
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return absl::InvalidArgumentError("node " + name + " (" + op + "): attribute " + key +
                                    " has an unexpected type");
}

}  // namespace easyscale::graph
