// File: worker/src/data/image_folder.h
//
// An image folder as a data set: one sub-folder per class (classes = the
// sorted sub-folder names, as torchvision's ImageFolder), samples = the
// .png/.jpg/.jpeg files directly in each (any case), sorted by name, class
// after class. Open reads every file once (bounded sizes, regular files
// only), hashes it and decodes it, so bad data is one error before training;
// afterwards a pool of threads decodes ahead the samples the coming steps
// take (known from the epoch permutation), into a cache bounded in bytes.
//
// Determinism: a decoded image is a pure function of the file's bytes (each
// re-read is checked against the SHA-256 taken at Open), and every random
// draw happens at batch time on the EST's stream, so the pool's threads, the
// cache's size and the timing change no bit.
//
// The folder's checksum, part of the job's identity: SHA-256 over
// "easyscale-image-folder-v1\0", then per sample in order its path relative
// to the folder, "\0", and the SHA-256 of its bytes (32 bytes).
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "data/image_decode.h"
#include "easyscale/common/status.h"

namespace easyscale::data {

// The largest image file read.
inline constexpr size_t kMaxImageFileBytes = size_t{64} << 20;
// The most samples a folder may hold (indices are 32-bit).
inline constexpr size_t kMaxImageFolderSamples = size_t{1} << 31;

struct ImageFolderOptions {
  int channels = 3;  // 1 (grey) or 3 (RGB): the model's
  int threads = 2;   // decoding threads; 0: decode when a batch asks
  size_t cache_bytes = size_t{256} << 20;
};

class ImageFolder {
 public:
  struct Scan {
    std::shared_ptr<ImageFolder> folder;
    std::vector<int32_t> labels;
    std::vector<std::string> classes;
    std::string sha256;  // hex
  };
  static StatusOr<Scan> Open(const std::string& root, const ImageFolderOptions& options);
  ~ImageFolder();
  ImageFolder(const ImageFolder&) = delete;
  ImageFolder& operator=(const ImageFolder&) = delete;

  // Sample `index` decoded: from the cache, or decoded now. Throws DataError
  // when its file changed since Open.
  std::shared_ptr<const DecodedImage> Get(uint32_t index);
  // Queues the samples for the pool (no-op without threads).
  void Prefetch(const std::vector<uint32_t>& indices);
  int channels() const { return options_.channels; }

 private:
  struct File {
    std::string path;
    std::array<uint8_t, 32> sha256;
  };
  struct Entry {
    std::shared_ptr<const DecodedImage> image;
    std::list<uint32_t>::iterator lru;
  };
  ImageFolder(std::vector<File> files, const ImageFolderOptions& options);
  // Reads the file, checks its bytes against the SHA-256 of Open, decodes it.
  StatusOr<DecodedImage> Decode(uint32_t index) const;
  // Caller holds mu_. Inserts and evicts the least recently used beyond the budget.
  void Insert(uint32_t index, std::shared_ptr<const DecodedImage> image);
  void DecodeLoop();

  static constexpr size_t kMaxQueued = size_t{1} << 16;
  const std::vector<File> files_;
  const ImageFolderOptions options_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<uint32_t, Entry> cache_;
  std::list<uint32_t> lru_;  // least recently used first
  size_t cached_bytes_ = 0;
  std::set<uint32_t> in_flight_;
  std::map<uint32_t, std::string> failed_;  // decode errors of the pool
  std::deque<uint32_t> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace easyscale::data
