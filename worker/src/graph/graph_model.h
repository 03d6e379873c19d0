// File: worker/src/graph/graph_model.h
//
// A graph as a Model the worker trains, a user's ONNX file or a built-in
// model (builtin_models.h): the graph's first input takes the [B, C, H, W]
// batch (B fixed to the micro-batch), its first output gives the [B, classes]
// logits; its parameters are the float initializers the logits depend on
// (named as the state_dict keys), its per-EST buffers the running state its
// ops update (BatchNormalization's running statistics). Runs on the CPU, or
// on a device backend where every op has a device half (CheckRunsOnDevice).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "easyscale/worker/model.h"

namespace easyscale::graph {

// The [C, H, W] of the file's one data input, all fixed: what an image
// folder's samples are resized to.
StatusOr<std::vector<int>> ImageInputShape(const std::string& path);

StatusOr<std::unique_ptr<Model>> LoadGraphModel(const std::string& path, std::vector<int> input_chw,
                                                int classes, int batch);

// The built-in model `name` ("mlp", "cnn"), its parameters drawn from the seed.
StatusOr<std::unique_ptr<Model>> BuiltinGraphModel(const std::string& name,
                                                   const std::vector<int>& input_chw, int classes,
                                                   int batch);

}  // namespace easyscale::graph
