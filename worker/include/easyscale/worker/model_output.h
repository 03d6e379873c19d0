// File: easyscale/worker/model_output.h
//
// The trained model, written for PyTorch and inference servers: rank 0 writes
// it at the end of a job into the output folder and, when asked, at every
// durable checkpoint into <folder>/step-<N>.
//   model.safetensors  every parameter and EST 0's buffers under their PyTorch
//                      state_dict names, plus "<bn>.num_batches_tracked" (int64
//                      scalar, the training steps taken) for each BatchNorm;
//                      tensors sorted by name; the data starts 8-byte aligned
//   model.onnx         a model from an ONNX file only: the file as exported,
//                      each trained initializer's data replaced (same name,
//                      dtype, dims; raw_data), BatchNorm running statistics
//                      included; passes onnx::checker::check_model
// BatchNorm running statistics are EST 0's, as PyTorch DDP saves rank 0's.
// Each file is written atomically (temporary file in the folder, fsync,
// rename, fsync of the folder): a reader sees a whole file or none.
//
//   ES_RETURN_IF_ERROR(CheckOutputFolder(dir));                  // before training
//   ES_ASSIGN_OR_RETURN(TrainedModel m, worker.Trained());
//   ES_ASSIGN_OR_RETURN(OutputDigests d, WriteTrainedModel(m, dir));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "easyscale/common/control_protocol.h"
#include "easyscale/common/status.h"

namespace easyscale {

inline constexpr const char* kOnnxFileName = "model.onnx";
inline constexpr const char* kSafetensorsFileName = "model.safetensors";

// One float32 tensor of the model under its state_dict name.
struct StateTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct TrainedModel {
  int64_t step = 0;                     // training steps taken
  std::vector<StateTensor> parameters;  // in model order
  std::vector<StateTensor> buffers;     // EST 0's (BatchNorm running statistics)
  // A model from an ONNX file: the file and the SHA-256 it had when training
  // started (the file must still have it). Empty for a built-in model.
  std::string onnxPath;
  std::string onnxSha256;
};

// OK when `dir` is an existing folder this process can create files in
// (checked by creating and removing one): called before training, so a bad
// output folder is an error at the start, not after hours.
Status CheckOutputFolder(const std::string& dir);

// The folder of the model written at checkpoint `step`: <dir>/step-<step>.
std::string StepOutputFolder(const std::string& dir, int64_t step);

// Writes model.safetensors (and model.onnx for a model from a file) into
// `dir`, creating `dir` if missing; returns the folder and the files' SHA-256s.
StatusOr<OutputDigests> WriteTrainedModel(const TrainedModel& model, const std::string& dir);

}  // namespace easyscale
