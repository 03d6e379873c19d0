// ONNX TensorProto to ConstantTensor.
#include "graph/onnx_tensor.h"

#include <bit>
#include <cstring>
#include <string>

#include "easyscale/common/checks.h"
#include "onnx/onnx_pb.h"

namespace easyscale::graph {
namespace {

// raw_data is little-endian; a plain copy reads it only on such hosts.
static_assert(std::endian::native == std::endian::little, "raw_data needs a little-endian host");

// Copies `n` elements from raw_data, checking its size.
template <typename T>
Status FromRaw(const std::string& raw, size_t n, std::vector<T>& out) {
  if (raw.size() != n * sizeof(T)) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw_data has ", raw.size(), " bytes, ", n, " elements need ", n * sizeof(T)));
  }
  out.resize(n);
  if (n != 0) std::memcpy(out.data(), raw.data(), raw.size());
  return absl::OkStatus();
}

// Copies typed field `name` (float_data, ...), which must hold `n` elements.
template <typename Repeated, typename T>
Status FromTyped(const Repeated& field, size_t n, const char* name, std::vector<T>& out) {
  if (static_cast<size_t>(field.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " has ", field.size(), " elements, the shape needs ", n));
  }
  out.assign(field.begin(), field.end());
  return absl::OkStatus();
}

}  // namespace

std::string DataTypeName(int32_t type) {
  const auto t = static_cast<onnx::TensorProto::DataType>(type);
  if (!onnx::TensorProto::DataType_IsValid(type)) return absl::StrCat(type);
  return onnx::TensorProto::DataType_Name(t);
}

StatusOr<ConstantTensor> FromTensorProto(const onnx::TensorProto& tensor) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::InvalidArgumentError("external data is not supported");
  }
  if (tensor.has_segment()) return absl::InvalidArgumentError("segments are not supported");
  ConstantTensor c;
  // Element counts beyond 2^40 cannot be a real tensor; the bound keeps the
  // product from overflowing.
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t n = 1;
  for (int64_t d : tensor.dims()) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("dimension ", d, " is negative"));
    if (d != 0 && n > kMaxElements / d) return absl::InvalidArgumentError("too many elements");
    n *= d;
    c.shape.push_back(d);
  }
  const size_t count = static_cast<size_t>(n);
  const bool raw = tensor.has_raw_data();
  switch (tensor.data_type()) {
    case onnx::TensorProto::FLOAT:
      c.dtype = DType::kFloat32;
      ES_RETURN_IF_ERROR(raw ? FromRaw(tensor.raw_data(), count, c.floats)
                             : FromTyped(tensor.float_data(), count, "float_data", c.floats));
      return c;
    case onnx::TensorProto::INT64:
      c.dtype = DType::kInt64;
      ES_RETURN_IF_ERROR(raw ? FromRaw(tensor.raw_data(), count, c.ints)
                             : FromTyped(tensor.int64_data(), count, "int64_data", c.ints));
      return c;
    case onnx::TensorProto::BOOL: {
      c.dtype = DType::kBool;
      // One byte per element in raw_data, int32_data otherwise.
      std::vector<uint8_t> bytes;
      if (raw) {
        ES_RETURN_IF_ERROR(FromRaw(tensor.raw_data(), count, bytes));
        c.ints.assign(bytes.begin(), bytes.end());
      } else {
        ES_RETURN_IF_ERROR(FromTyped(tensor.int32_data(), count, "int32_data", c.ints));
      }
      for (int64_t& b : c.ints) b = b != 0;
      return c;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("data type ", DataTypeName(tensor.data_type()),
                       " is not supported (FLOAT, INT64 and BOOL are)"));
  }
}

}  // namespace easyscale::graph
