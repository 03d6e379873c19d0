// File: worker/src/graph/onnx_writer.h
//
// The trained model as ONNX (model_output.h): the user's file as exported,
// each trained initializer's data replaced.
//   ES_ASSIGN_OR_RETURN(std::string bytes, TrainedOnnxModel(path, sha256, trained));
#pragma once

#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/worker/model_output.h"

namespace easyscale::graph {

// The ONNX file `path`, which must still have SHA-256 `sha256` (the bytes
// trained), serialised with each initializer named in `trained` holding the
// trained values instead (same name, dtype and dims; raw_data); everything
// else as exported. The result passes onnx::checker::check_model.
StatusOr<std::string> TrainedOnnxModel(const std::string& path, const std::string& sha256,
                                       const std::vector<const StateTensor*>& trained);

}  // namespace easyscale::graph
