// File: easyscale/worker/model.h
//
// A model a worker trains: parameters (values and gradients), per-EST buffers
// (BatchNorm running statistics), a forward pass from a [B, C, H, W] batch to
// [B, classes] logits and a backward pass from the logits' gradient. Every
// model is a graph of the graph runtime (graph.h): a built-in one (`mlp`,
// `cnn`) built in C++, or a user's loaded from an ONNX file.
//   ES_ASSIGN_OR_RETURN(auto model, LoadModel(args, {1, 28, 28}, 10, batch));
//   model->InitParams(seed);
//   const Tensor& logits = model->Forward(x, ctx);
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "easyscale/common/job_spec.h"
#include "easyscale/common/status.h"
#include "easyscale/worker/backend.h"
#include "easyscale/worker/dataset.h"

namespace easyscale {

class Model {
 public:
  virtual ~Model() = default;
  // The parameters' initial values: from the seed for a built-in model, the
  // file's own for a loaded one.
  virtual void InitParams(uint64_t seed) = 0;
  virtual const Tensor& Forward(const Tensor& x, PassContext& ctx) = 0;
  virtual void Backward(const Tensor& dlogits, PassContext& ctx) = 0;
  // Fresh per-EST buffers, in the order PassContext::buffers expects.
  virtual std::vector<Tensor> InitialBuffers() const = 0;
  // The buffers' names, as the PyTorch state_dict keys (a loaded file's
  // initializer names), in the order of InitialBuffers.
  virtual std::vector<std::string> BufferNames() const = 0;
  // Whether every sample of `data` is an input the model can take (a loaded
  // graph's token ids must index its embeddings): checked once, before
  // training, so a bad pairing is one clear error rather than a stop mid-run.
  virtual Status AcceptsData(const Dataset&) const { return absl::OkStatus(); }
  // Whether every op of the model has device kernels (a backend with OnDevice
  // can run it): FailedPrecondition naming the first node that has none.
  virtual Status CheckRunsOnDevice() const = 0;
  // Samples one pass takes: the micro-batch the graph was built for.
  virtual int FixedBatch() const = 0;
  // What identifies the model beyond TrainingArgs (a loaded file's SHA-256), for
  // the job identity checkpoints carry; "" for a built-in model.
  virtual std::string Fingerprint() const { return ""; }
  // The most bytes of one pass's values and gradients in use at once so far
  // (parameters, their gradients and the ops' own memory aside): what
  // buffers packed without waste would need.
  virtual size_t PeakBytesInUse() const = 0;
  // Device memory that holds nothing from the end of a training pass
  // (Backward) to the start of the next (Forward), where the passes' values
  // and gradients live: a caller may use it in between. Empty on the host and
  // before the first pass on a device.
  virtual std::span<std::byte> DeviceMemoryIdleBetweenPasses() const = 0;

  const std::vector<Param*>& params() const { return params_; }
  size_t NumParamValues() const;

 protected:
  std::vector<Param*> params_;
};

// A built-in model for `batch` samples a pass. Its parameters and buffers are
// named and shaped as in a torch.nn.Sequential of the same layers
// ("2.weight", "1.running_mean"; deploy/examples/models/models.py's Cnn is
// the "cnn"), so the trained model loads into PyTorch.
// "mlp": avgpool2 - flatten - linear(196,128) - relu - dropout(0.1) - linear(128,classes)
// "cnn": conv5(8) - bn - relu - maxpool2 - conv5(16) - bn - relu - maxpool2 - flatten -
//        dropout(0.25) - linear(256,64) - relu - linear(64,classes)
StatusOr<std::unique_ptr<Model>> BuildModel(const std::string& name,
                                            const std::vector<int>& input_chw, int classes,
                                            int batch);

// The [C, H, W] images take for the model `args` names, what an image folder
// decodes to: a model file's declared input (fixed C, H, W), [1, 28, 28] for
// the built-in models (made for the digits).
StatusOr<std::vector<int>> ModelImageShape(const TrainingArgs& args);

// The model `args` names: a built-in one, or the ONNX file args.modelFile for
// `batch` samples a pass (model "file").
StatusOr<std::unique_ptr<Model>> LoadModel(const TrainingArgs& args, std::vector<int> input_chw,
                                           int classes, int batch);

}  // namespace easyscale
