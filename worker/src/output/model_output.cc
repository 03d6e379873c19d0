// The trained model's files: safetensors always, ONNX for a model from a file.
#include "easyscale/worker/model_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/sha256.h"
#include "graph/onnx_writer.h"
#include "output/safetensors_writer.h"

namespace easyscale {
namespace {

constexpr std::string_view kRunningMean = "running_mean";

template <typename T>
std::string_view BytesOf(const std::vector<T>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

std::string Join(const std::string& dir, const char* file) { return dir + "/" + file; }

}  // namespace

Status CheckOutputFolder(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("output folder ", dir, ": ", std::strerror(errno), " (create it first)"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError("output folder " + dir + ": not a folder");
  }
  // Permissions alone do not tell (root, read-only mounts): create a file.
  const std::string probe = absl::StrCat(dir, "/.easyscale-write-probe-", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("output folder ", dir, ": cannot create files there: ", std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return absl::OkStatus();
}

std::string StepOutputFolder(const std::string& dir, int64_t step) {
  return absl::StrCat(dir, "/step-", step);
}

StatusOr<OutputDigests> WriteTrainedModel(const TrainedModel& model, const std::string& dir) {
  ES_RETURN_IF_ERROR(MakeDirs(dir));
  std::vector<SafetensorsEntry> entries;
  std::vector<const StateTensor*> trained;
  for (const auto* list : {&model.parameters, &model.buffers}) {
    for (const StateTensor& t : *list) {
      entries.push_back({t.name, "F32", t.shape, BytesOf(t.values)});
      trained.push_back(&t);
    }
  }
  // PyTorch's BatchNorm counts its training forward passes in
  // num_batches_tracked, which load_state_dict(strict=True) asks for and the
  // ONNX export drops: one per step for every EST (each runs one micro-batch a
  // step), so EST 0's count is the step.
  const std::vector<int64_t> steps = {model.step};
  for (const StateTensor& b : model.buffers) {
    if (!b.name.ends_with(kRunningMean)) continue;
    const std::string prefix = b.name.substr(0, b.name.size() - kRunningMean.size());
    entries.push_back({prefix + "num_batches_tracked", "I64", {}, BytesOf(steps)});
  }
  std::set<std::string> names;
  for (const SafetensorsEntry& e : entries) {
    if (!names.insert(e.name).second) {
      return absl::InvalidArgumentError("the model has two tensors named " + e.name +
                                        ": its safetensors file would be ambiguous");
    }
  }
  OutputDigests digests;
  digests.path = dir;
  const std::string safetensors = EncodeSafetensors(
      std::move(entries), {{"format", "pt"}, {"step", std::to_string(model.step)}});
  ES_RETURN_IF_ERROR(WriteFileAtomic(Join(dir, kSafetensorsFileName), safetensors));
  digests.safetensorsSha256 = Sha256Hex(safetensors.data(), safetensors.size());
  if (!model.onnxPath.empty()) {
    ES_ASSIGN_OR_RETURN(const std::string onnx,
                        graph::TrainedOnnxModel(model.onnxPath, model.onnxSha256, trained));
    ES_RETURN_IF_ERROR(WriteFileAtomic(Join(dir, kOnnxFileName), onnx));
    digests.onnxSha256 = Sha256Hex(onnx.data(), onnx.size());
  }
  return digests;
}

}  // namespace easyscale
