// File: worker/src/graph/onnx_file.h
//
// An ONNX file's bytes as a checked ModelProto, shared by the loader (which
// trains the model) and the writer of the trained model (onnx_writer.cc), so
// both accept exactly the same files. Only .cc files include the ONNX headers.
#pragma once

#include <string>

#include "easyscale/common/status.h"

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace easyscale::graph {

// Parses `bytes` and runs ONNX's checker; errors say what is wrong in one line.
StatusOr<onnx::ModelProto> ParseModel(const std::string& bytes);

// `s` with "<path>: " before its message, folded onto one line.
Status InFile(const std::string& path, const Status& s);

}  // namespace easyscale::graph
