// File: worker/src/data/tensor_files.h
//
// Users' data as two tensors, `inputs` [N, ...] and `labels` [N]:
//   - safetensors: u64 little-endian header length n (at most 100 MB and
//     within the file), n bytes of JSON {"inputs": {"dtype", "shape",
//     "data_offsets": [begin, end]}, "labels": {...}, "__metadata__":
//     {"classes": "K"} (optional)}, then the data; offsets are relative to
//     the end of the header, every tensor's bytes must be exactly its shape's.
//   - npy: a folder holding inputs.npy and labels.npy (format versions 1, 2
//     and 3; little-endian, C order).
// Inputs: float32 (F32, '<f4'; finite), uint8 (U8, '|u1') or int64 token ids
// (I64, '<i8'; in [0, 2^24)); labels: int64 (I64, '<i8'), also int32 and
// uint8, in [0, classes) where classes is the metadata's or the largest
// label + 1. Every error is one line naming the file and the tensor.
#pragma once

#include <string>

#include "easyscale/common/status.h"
#include "easyscale/worker/dataset.h"

namespace easyscale::data {

// The largest tensor file read whole.
inline constexpr size_t kMaxTensorFileBytes = size_t{4} << 30;

StatusOr<Dataset> LoadSafetensors(const std::string& path);
StatusOr<Dataset> LoadNpyFolder(const std::string& dir);

}  // namespace easyscale::data
