// File: worker/src/graph/onnx_tensor.h
//
// An ONNX TensorProto as a ConstantTensor: how the loader reads initializers
// and tensor attributes, and how the tests read ONNX's test data, so both see
// the same elements. Only .cc files include the ONNX headers.
//
//   ES_ASSIGN_OR_RETURN(ConstantTensor c, FromTensorProto(model.graph().initializer(0)));
#pragma once

#include <cstdint>
#include <string>

#include "easyscale/common/status.h"
#include "easyscale/worker/graph.h"

namespace onnx {
class TensorProto;
}  // namespace onnx

namespace easyscale::graph {

// float32, int64 and bool tensors, from raw_data (little-endian) or the typed
// fields. Other data types, external data and segments are InvalidArgument
// saying which; the message does not name the tensor (callers know what it is).
StatusOr<ConstantTensor> FromTensorProto(const onnx::TensorProto& tensor);

// An ONNX TensorProto data type's name ("FLOAT16"), or its number if unknown.
std::string DataTypeName(int32_t type);

}  // namespace easyscale::graph
