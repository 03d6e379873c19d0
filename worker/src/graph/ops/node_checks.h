// File: worker/src/graph/ops/node_checks.h
//
// The checks op factories share: errors that name the node, the input count
// and dtypes, and axis normalization.
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

// Between `min` and `max` inputs, the first `min` present; at most `outputs` outputs.
inline Status CheckArity(const Node& node, const std::vector<OpInput>& inputs, size_t min,
                         size_t max, size_t outputs) {
  if (inputs.size() < min || inputs.size() > max) {
    return NodeError(node,
                     absl::StrCat("takes ", min, " to ", max, " inputs, has ", inputs.size()));
  }
  for (size_t i = 0; i < min; ++i) {
    if (inputs[i].info == nullptr) return NodeError(node, absl::StrCat("input ", i, " is missing"));
  }
  if (node.outputs.empty() || node.outputs.size() > outputs || node.outputs[0].empty()) {
    return NodeError(node, absl::StrCat("takes 1 to ", outputs, " outputs, the first present"));
  }
  return absl::OkStatus();
}

// Input `i` (present) has dtype `want`.
inline Status CheckDType(const Node& node, const std::vector<OpInput>& inputs, size_t i,
                         DType want) {
  if (inputs[i].info->dtype != want) {
    return NodeError(node, absl::StrCat("input ", i, " (", node.inputs[i], ") is ",
                                        ToString(inputs[i].info->dtype), ", not ", ToString(want)));
  }
  return absl::OkStatus();
}

// `axis` in [-rank, rank) as a dimension index; `what` names it in the error.
inline StatusOr<size_t> NormalizeAxis(const Node& node, const std::string& what, int64_t axis,
                                      size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    return NodeError(node, absl::StrCat(what, " ", axis, " is out of range for rank ", rank));
  }
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

}  // namespace easyscale::graph
