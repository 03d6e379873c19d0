// The trained model as ONNX: the exported file, trained initializers replaced.
#include "graph/onnx_writer.h"

#include <cstring>
#include <exception>
#include <limits>
#include <map>

#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/sha256.h"
#include "graph/onnx_file.h"
#include "onnx/checker.h"
#include "onnx/onnx_pb.h"

namespace easyscale::graph {

StatusOr<std::string> TrainedOnnxModel(const std::string& path, const std::string& sha256,
                                       const std::vector<const StateTensor*>& trained) {
  // The same bound as the loader's: protobuf parses no message of 2 GiB or more.
  ES_ASSIGN_OR_RETURN(const std::string bytes,
                      ReadFile(path, static_cast<size_t>(std::numeric_limits<int>::max())));
  if (Sha256Hex(bytes.data(), bytes.size()) != sha256) {
    return absl::FailedPreconditionError(
        path +
        ": the model file changed since training started; its trained ONNX would not "
        "match it (keep the file unchanged while the job runs)");
  }
  StatusOr<onnx::ModelProto> model = ParseModel(bytes);
  if (!model.ok()) return InFile(path, model.status());
  std::map<std::string, const StateTensor*> by_name;
  for (const StateTensor* t : trained) by_name.emplace(t->name, t);
  for (onnx::TensorProto& init : *model->mutable_graph()->mutable_initializer()) {
    const auto it = by_name.find(init.name());
    if (it == by_name.end()) continue;
    const StateTensor& t = *it->second;
    const std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    if (init.data_type() != onnx::TensorProto::FLOAT || dims != t.shape) {
      return absl::InternalError(absl::StrCat(path, ": initializer ", t.name,
                                              " is not the float32 tensor that was trained"));
    }
    // raw_data holds the values little-endian, as this (x86-64, ARM64) host does.
    init.clear_float_data();
    init.set_raw_data(std::string(reinterpret_cast<const char*>(t.values.data()),
                                  t.values.size() * sizeof(float)));
    by_name.erase(it);
  }
  if (!by_name.empty()) {
    return absl::InternalError(absl::StrCat(path, ": no initializer ", by_name.begin()->first,
                                            " to hold the trained values"));
  }
  try {
    onnx::checker::check_model(*model);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat(path, ": the trained model fails the ONNX checker: ", e.what()));
  }
  std::string out;
  if (!model->SerializeToString(&out)) {
    return absl::InternalError(path + ": the trained model does not serialise");
  }
  return out;
}

}  // namespace easyscale::graph
