// File: easyscale/worker/predict.h
//
// Inference on held-out samples, shared by the job's final evaluation and
// `easyscale-worker predict`, so that both compute the same logits: the model
// in eval mode (BatchNorm from `buffers`, no dropout), in chunks of its fixed
// batch (a loaded graph's) or of 250 samples; a short last chunk is padded
// with its first sample, whose extra rows are dropped.
//
//   Predictions p = Predict(*model, buffers, data, SplitTrainTest(data.count()).test, k);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/worker/backend.h"
#include "easyscale/worker/dataset.h"
#include "easyscale/worker/model.h"

namespace easyscale {

struct Predictions {
  double accuracy = 0.0;  // share of samples whose largest logit is their label
  int classes = 0;
  std::vector<float> logits;  // [samples, classes], row-major, in the order given
};

// Writes float32 values of `shape` as a NumPy .npy file (format 1.0,
// little-endian, C order), atomically.
Status WriteNpy(const std::string& path, const std::vector<int>& shape,
                const std::vector<float>& values);

// Uploads the parameters and `buffers` to `k` and runs the model over `samples`.
Predictions Predict(Model& model, std::vector<Tensor>& buffers, const Dataset& data,
                    const std::vector<uint32_t>& samples, KernelBackend& k);

}  // namespace easyscale
