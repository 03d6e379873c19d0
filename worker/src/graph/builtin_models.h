// File: worker/src/graph/builtin_models.h
//
// The built-in models ("mlp", "cnn", model.h) as graphs built in C++, in the
// forms a PyTorch export of the same torch.nn.Sequential has (opset 15,
// training mode), so they run on the same runtime as a loaded file.
//   ES_ASSIGN_OR_RETURN(BuiltinGraph b, MakeBuiltinGraph("cnn", {1, 28, 28}, 10, 32));
#pragma once

#include <map>
#include <string>
#include <vector>

#include "easyscale/worker/graph.h"

namespace easyscale::graph {

struct BuiltinGraph {
  // Input "input" [batch, C, H, W], output [batch, classes] logits;
  // initializers named as the Sequential's state_dict keys.
  Graph graph;
  // The parameters drawn from the seed, with their fan-in (PyTorch's default
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in))); the others (BatchNorm's gamma 1 and
  // beta 0) start at their initializer's value.
  std::map<std::string, int> fan_in;
};

// InvalidArgument for an unknown name or an input size the model cannot take.
StatusOr<BuiltinGraph> MakeBuiltinGraph(const std::string& name, const std::vector<int>& input_chw,
                                        int classes, int batch);

}  // namespace easyscale::graph
