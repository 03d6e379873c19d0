#include "data/tensor_files.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/sha256.h"

namespace easyscale::data {
namespace {

static_assert(std::endian::native == std::endian::little, "tensor files are read as stored");

enum class ElementType { kF32, kU8, kI32, kI64 };

size_t ElementBytes(ElementType t) {
  switch (t) {
    case ElementType::kU8:
      return 1;
    case ElementType::kF32:
    case ElementType::kI32:
      return 4;
    case ElementType::kI64:
      return 8;
  }
  return 0;
}

// One tensor's type, shape and bytes, inside the file's contents.
struct RawTensor {
  std::string what;  // "<file>: tensor inputs", for errors
  ElementType type = ElementType::kF32;
  std::vector<int64_t> shape;
  std::string_view bytes;
};

// The element count of `shape`, or an error when a dimension is negative or
// the count overflows what a file can hold.
StatusOr<size_t> ElementCount(const RawTensor& t) {
  size_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0) return absl::DataLossError(absl::StrCat(t.what, ": negative dimension ", d));
    if (d != 0 && n > kMaxTensorFileBytes / static_cast<size_t>(d)) {
      return absl::DataLossError(t.what + ": shape too large for a file");
    }
    n *= static_cast<size_t>(d);
  }
  return n;
}

Status CheckSize(const RawTensor& t) {
  ES_ASSIGN_OR_RETURN(const size_t n, ElementCount(t));
  if (n * ElementBytes(t.type) != t.bytes.size()) {
    return absl::DataLossError(absl::StrCat(t.what, ": shape [", absl::StrJoin(t.shape, ", "),
                                            "] takes ", n * ElementBytes(t.type),
                                            " bytes, the file holds ", t.bytes.size()));
  }
  return absl::OkStatus();
}

template <typename T>
T At(const RawTensor& t, size_t i) {
  T v;
  std::memcpy(&v, t.bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

int64_t LabelAt(const RawTensor& t, size_t i) {
  switch (t.type) {
    case ElementType::kU8:
      return At<uint8_t>(t, i);
    case ElementType::kI32:
      return At<int32_t>(t, i);
    default:
      return At<int64_t>(t, i);
  }
}

// The data set of `inputs` and `labels`, every value checked. `classes`: 0
// to take the largest label + 1.
StatusOr<Dataset> ToDataset(const RawTensor& inputs, const RawTensor& labels, int64_t classes) {
  ES_RETURN_IF_ERROR(CheckSize(inputs));
  ES_RETURN_IF_ERROR(CheckSize(labels));
  if (inputs.shape.size() < 2 || inputs.shape.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(inputs.what, ": shape [", absl::StrJoin(inputs.shape, ", "),
                     "]: want [N, F] rows or token ids, or [N, C, H, W] images"));
  }
  const int64_t count = inputs.shape[0];
  if (count < 1 || count > (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrCat(inputs.what, ": ", count, " samples"));
  }
  if (labels.shape.size() != 1 || labels.shape[0] != count) {
    return absl::InvalidArgumentError(absl::StrCat(labels.what, ": shape [",
                                                   absl::StrJoin(labels.shape, ", "),
                                                   "] does not match the ", count, " inputs"));
  }
  if (labels.type == ElementType::kF32) {
    return absl::InvalidArgumentError(labels.what + ": float32 labels; want class indices (int64)");
  }
  Dataset d;
  d.shape.assign(inputs.shape.begin() + 1, inputs.shape.end());
  for (int dim : d.shape) {
    if (dim < 1) return absl::InvalidArgumentError(inputs.what + ": a sample has no values");
  }
  int64_t largest = -1;
  d.labels.resize(static_cast<size_t>(count));
  for (size_t i = 0; i < d.labels.size(); ++i) {
    const int64_t label = LabelAt(labels, i);
    if (label < 0 || (classes > 0 && label >= classes) || label > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat(labels.what, ": label ", label, " of sample ", i, " is outside [0, ",
                       classes > 0 ? absl::StrCat(classes) : std::string("2^31"), ")"));
    }
    largest = std::max(largest, label);
    d.labels[i] = static_cast<int32_t>(label);
  }
  d.classes = static_cast<int>(classes > 0 ? classes : largest + 1);
  const size_t n = inputs.bytes.size() / ElementBytes(inputs.type);
  switch (inputs.type) {
    case ElementType::kU8:
      d.type = SampleType::kPixels;
      d.pixels.assign(inputs.bytes.begin(), inputs.bytes.end());
      break;
    case ElementType::kF32:
      d.type = SampleType::kFloat32;
      d.floats.resize(n);
      std::memcpy(d.floats.data(), inputs.bytes.data(), inputs.bytes.size());
      for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(d.floats[i])) {
          return absl::InvalidArgumentError(
              absl::StrCat(inputs.what, ": value ", i, " is ", d.floats[i], ", not finite"));
        }
      }
      break;
    case ElementType::kI32:
    case ElementType::kI64:
      d.type = SampleType::kTokenIds;
      d.token_ids.resize(n);
      for (size_t i = 0; i < n; ++i) {
        const int64_t id =
            inputs.type == ElementType::kI64 ? At<int64_t>(inputs, i) : At<int32_t>(inputs, i);
        // A batch carries ids as floats, exact below 2^24.
        if (id < 0 || id >= (int64_t{1} << 24)) {
          return absl::InvalidArgumentError(
              absl::StrCat(inputs.what, ": token id ", id, " (value ", i, ") outside [0, 2^24)"));
        }
        d.token_ids[i] = id;
      }
      break;
  }
  return d;
}

StatusOr<RawTensor> SafetensorsEntry(const nlohmann::json& header, const std::string& name,
                                     std::string_view data, const std::string& path) {
  RawTensor t;
  t.what = path + ": tensor " + name;
  const auto it = header.find(name);
  if (it == header.end() || !it->is_object()) {
    return absl::InvalidArgumentError(t.what + ": missing (the file must hold inputs and labels)");
  }
  const nlohmann::json& e = *it;
  if (!e.contains("dtype") || !e["dtype"].is_string()) {
    return absl::DataLossError(t.what + ": no dtype");
  }
  const std::string dtype = e["dtype"].get<std::string>();
  const std::map<std::string, ElementType> kTypes = {{"F32", ElementType::kF32},
                                                     {"U8", ElementType::kU8},
                                                     {"I32", ElementType::kI32},
                                                     {"I64", ElementType::kI64}};
  const auto type = kTypes.find(dtype);
  if (type == kTypes.end()) {
    return absl::InvalidArgumentError(t.what + ": dtype " + dtype +
                                      " is not supported (F32, U8, I64 and I32 are)");
  }
  t.type = type->second;
  if (!e.contains("shape") || !e["shape"].is_array()) {
    return absl::DataLossError(t.what + ": no shape");
  }
  for (const auto& d : e["shape"]) {
    if (!d.is_number_integer()) return absl::DataLossError(t.what + ": shape: not integers");
    t.shape.push_back(d.get<int64_t>());
  }
  const auto& offsets = e.contains("data_offsets") ? e["data_offsets"] : nlohmann::json();
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return absl::DataLossError(t.what + ": data_offsets: want [begin, end]");
  }
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (begin > end || end > data.size()) {
    return absl::DataLossError(absl::StrCat(t.what, ": data_offsets [", begin, ", ", end,
                                            "] outside the ", data.size(), " data bytes"));
  }
  t.bytes = data.substr(begin, end - begin);
  return t;
}

// npy's header dictionary, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
StatusOr<RawTensor> ParseNpy(std::string_view file, const std::string& path) {
  RawTensor t;
  t.what = path;
  constexpr std::string_view kMagic("\x93NUMPY", 6);
  if (file.size() < 10 || file.substr(0, 6) != kMagic) {
    return absl::DataLossError(path + ": not a .npy file (bad magic)");
  }
  const int major = static_cast<uint8_t>(file[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(file[8]) | static_cast<size_t>(static_cast<uint8_t>(file[9]))
                                                     << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (file.size() < 12) return absl::DataLossError(path + ": truncated .npy header");
    uint32_t len;
    std::memcpy(&len, file.data() + 8, 4);
    header_len = len;
    start = 12;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": .npy format version ", major, " is not supported (1, 2 and 3 are)"));
  }
  if (header_len > file.size() - start) {
    return absl::DataLossError(absl::StrCat(path, ": truncated .npy header (", header_len,
                                            " bytes said, ", file.size() - start, " left)"));
  }
  const std::string header(file.substr(start, header_len));
  std::smatch m;
  static const std::regex kDescr(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex kFortran(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex kShape(R"('shape'\s*:\s*\(([0-9,\s]*)\))");
  if (!std::regex_search(header, m, kDescr)) return absl::DataLossError(path + ": no descr");
  const std::string descr = m[1];
  const std::map<std::string, ElementType> kTypes = {{"<f4", ElementType::kF32},
                                                     {"|u1", ElementType::kU8},
                                                     {"<u1", ElementType::kU8},
                                                     {"<i4", ElementType::kI32},
                                                     {"<i8", ElementType::kI64}};
  const auto type = kTypes.find(descr);
  if (type == kTypes.end()) {
    return absl::InvalidArgumentError(path + ": dtype '" + descr +
                                      "' is not supported ('<f4' float32, '|u1' uint8, '<i8' "
                                      "int64 and '<i4' int32 are)");
  }
  t.type = type->second;
  if (!std::regex_search(header, m, kFortran)) {
    return absl::DataLossError(path + ": no fortran_order");
  }
  if (m[1] == "True") return absl::InvalidArgumentError(path + ": Fortran order; want C order");
  if (!std::regex_search(header, m, kShape)) return absl::DataLossError(path + ": no shape");
  const std::string dims = m[1];
  for (absl::string_view dim : absl::StrSplit(dims, ',', absl::SkipWhitespace())) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(dim, &d)) return absl::DataLossError(path + ": bad shape");
    t.shape.push_back(d);
  }
  t.bytes = file.substr(start + header_len);
  return t;
}

}  // namespace

StatusOr<Dataset> LoadSafetensors(const std::string& path) {
  ES_ASSIGN_OR_RETURN(const std::string file, ReadFile(path, kMaxTensorFileBytes));
  constexpr uint64_t kMaxHeaderBytes = 100 << 20;  // the format's own limit
  uint64_t header_len = 0;
  if (file.size() >= 8) std::memcpy(&header_len, file.data(), 8);
  if (file.size() < 8 || header_len > kMaxHeaderBytes || header_len > file.size() - 8) {
    return absl::DataLossError(
        absl::StrCat(path, ": truncated safetensors header (file of ", file.size(), " bytes",
                     file.size() >= 8 ? ", header of " : "",
                     file.size() >= 8 ? absl::StrCat(header_len, " bytes") : "", ")"));
  }
  const nlohmann::json header =
      nlohmann::json::parse(file.substr(8, header_len), nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) {
    return absl::DataLossError(path + ": safetensors header is not a JSON object");
  }
  const std::string_view data = std::string_view(file).substr(8 + header_len);
  ES_ASSIGN_OR_RETURN(const RawTensor inputs, SafetensorsEntry(header, "inputs", data, path));
  ES_ASSIGN_OR_RETURN(const RawTensor labels, SafetensorsEntry(header, "labels", data, path));
  int64_t classes = 0;
  if (const auto meta = header.find("__metadata__");
      meta != header.end() && meta->is_object() && meta->contains("classes")) {
    const auto& c = (*meta)["classes"];
    if (!c.is_string() || !absl::SimpleAtoi(c.get<std::string>(), &classes) || classes < 1 ||
        classes > INT32_MAX) {
      return absl::InvalidArgumentError(path + ": __metadata__.classes: want a count as a string");
    }
  }
  ES_ASSIGN_OR_RETURN(Dataset d, ToDataset(inputs, labels, classes));
  d.sha256 = Sha256Hex(file.data(), file.size());
  return d;
}

StatusOr<Dataset> LoadNpyFolder(const std::string& dir) {
  ES_ASSIGN_OR_RETURN(const std::string inputs_file,
                      ReadFile(dir + "/inputs.npy", kMaxTensorFileBytes));
  ES_ASSIGN_OR_RETURN(const std::string labels_file,
                      ReadFile(dir + "/labels.npy", kMaxTensorFileBytes));
  ES_ASSIGN_OR_RETURN(const RawTensor inputs, ParseNpy(inputs_file, dir + "/inputs.npy"));
  ES_ASSIGN_OR_RETURN(const RawTensor labels, ParseNpy(labels_file, dir + "/labels.npy"));
  ES_ASSIGN_OR_RETURN(Dataset d, ToDataset(inputs, labels, 0));
  Sha256 h;
  h.Update(std::string_view("easyscale-npy-v1\0", 17));
  for (const std::string* f : {&inputs_file, &labels_file}) {
    const std::string part = Sha256Hex(f->data(), f->size());
    h.Update(part);
  }
  d.sha256 = h.HexDigest();
  return d;
}

}  // namespace easyscale::data
