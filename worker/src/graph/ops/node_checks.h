// File: worker/src/graph/ops/node_checks.h
//
// The checks every op factory shares, so that all of them word an error the
// same way: one line "node <name> (<op>): <what>" that names the attribute or
// the input (its name in the operator's schema, then its tensor's name).
//
//   ES_RETURN_IF_ERROR(CheckArity(node, inputs, 2, 3, 1));
//   ES_RETURN_IF_ERROR(CheckDType(node, inputs, 0, "X", DType::kFloat32));
//   // error: "node conv1 (Conv): input X (x) is int64, not float32"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"
#include "graph/op.h"

namespace easyscale::graph {

// InvalidArgument "node <name> (<op>): <what>".
inline Status NodeError(const Node& node, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("node ", node.name, " (", node.op, "): ", what));
}

// Shape as "[2, 3]" for error messages.
inline std::string ShapeString(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) absl::StrAppend(&out, i ? ", " : "", s[i]);
  return out + "]";
}

// Whether optional input `i` is present.
inline bool HasInput(const std::vector<OpInput>& inputs, size_t i) {
  return i < inputs.size() && inputs[i].info != nullptr;
}

// Between `min` and `max` inputs, the first `min` present; output 0 present
// and at most `max_outputs` outputs.
inline Status CheckArity(const Node& node, const std::vector<OpInput>& inputs, size_t min,
                         size_t max, size_t max_outputs) {
  if (inputs.size() < min || inputs.size() > max) {
    return NodeError(node,
                     absl::StrCat("takes ", min, " to ", max, " inputs, not ", inputs.size()));
  }
  for (size_t i = 0; i < min; ++i) {
    if (!HasInput(inputs, i)) return NodeError(node, absl::StrCat("input ", i, " is missing"));
  }
  if (node.outputs.empty() || node.outputs.size() > max_outputs || node.outputs[0].empty()) {
    return NodeError(node, absl::StrCat("needs output 0 and at most ", max_outputs, " outputs"));
  }
  return absl::OkStatus();
}

// The info of input `i`, which the node must have; `what` is the input's name
// in the operator's schema (X, data).
inline StatusOr<const ValueInfo*> RequiredInput(const Node& node,
                                                const std::vector<OpInput>& inputs, size_t i,
                                                const std::string& what) {
  if (!HasInput(inputs, i)) return NodeError(node, absl::StrCat("input ", what, " is missing"));
  return inputs[i].info;
}

// Input `i` (schema name `what`) is present and of dtype `want`.
inline Status CheckDType(const Node& node, const std::vector<OpInput>& inputs, size_t i,
                         const std::string& what, DType want) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* info, RequiredInput(node, inputs, i, what));
  if (info->dtype != want) {
    return NodeError(node, absl::StrCat("input ", what, " (", node.inputs[i], ") is ",
                                        ToString(info->dtype), ", not ", ToString(want)));
  }
  return absl::OkStatus();
}

// The elements of input `i`, an int64 tensor of rank <= 1 that configures the
// op (Reshape's shape, Slice's starts): it must be known at load time.
inline StatusOr<std::vector<int64_t>> ConstantInts(const Node& node,
                                                   const std::vector<OpInput>& inputs, size_t i,
                                                   const std::string& what) {
  ES_ASSIGN_OR_RETURN(const ValueInfo* info, RequiredInput(node, inputs, i, what));
  if (inputs[i].constant == nullptr) {
    return NodeError(node, absl::StrCat(what, " input is not known at load time"));
  }
  if (info->dtype != DType::kInt64 || info->shape.size() > 1) {
    return NodeError(node, absl::StrCat(what, " input must be an int64 scalar or 1-D tensor, not ",
                                        ToString(info->dtype), " ", ShapeString(info->shape)));
  }
  return inputs[i].constant->ints;
}

// An int64 list that is attribute `what` before opset 13 and optional
// constant input `i` from opset 13 on (Squeeze's axes, Split's split); empty
// when absent.
inline StatusOr<std::vector<int64_t>> IntsAttributeOrInput(const Node& node, int64_t opset,
                                                           const std::vector<OpInput>& inputs,
                                                           size_t i, const std::string& what) {
  if (opset < 13) return node.Get<std::vector<int64_t>>(what, {});
  if (!HasInput(inputs, i)) return std::vector<int64_t>{};
  return ConstantInts(node, inputs, i, what);
}

// `axis` in [-rank, rank) as a dimension index; `what` names it in the error.
inline StatusOr<int64_t> NormalizeAxis(const Node& node, const std::string& what, int64_t axis,
                                       int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return NodeError(node, absl::StrCat(what, " ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

}  // namespace easyscale::graph
