#include "data/image_folder.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/sha256.h"
#include "easyscale/worker/dataset.h"

namespace easyscale::data {
namespace {

namespace fs = std::filesystem;

// The names in `dir` (sorted bytewise) of the entries `keep` selects.
template <typename Keep>
StatusOr<std::vector<std::string>> SortedEntries(const std::string& dir, Keep keep) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (keep(*it)) names.push_back(it->path().filename().string());
  }
  if (ec) return absl::InvalidArgumentError(dir + ": cannot list the folder: " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

bool IsImageName(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (const char* ext : {".png", ".jpg", ".jpeg"}) {
    const size_t n = std::strlen(ext);
    if (lower.size() > n && lower.compare(lower.size() - n, n, ext) == 0) return true;
  }
  return false;
}

// Runs work(i) for i in [0, n) on `threads` threads (the caller's alone for 0 or 1).
template <typename Work>
void ForEachIndex(size_t n, int threads, Work work) {
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i = next++; i < n; i = next++) work(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(run);
  run();
  for (std::thread& t : pool) t.join();
}

}  // namespace

StatusOr<ImageFolder::Scan> ImageFolder::Open(const std::string& root,
                                              const ImageFolderOptions& options) {
  Scan scan;
  ES_ASSIGN_OR_RETURN(scan.classes, SortedEntries(root, [](const fs::directory_entry& e) {
                        std::error_code ec;
                        return e.is_directory(ec);
                      }));
  if (scan.classes.empty()) {
    return absl::InvalidArgumentError(
        root + ": no class folders (an image folder holds one sub-folder of images per class)");
  }
  std::vector<File> files;
  std::vector<std::string> relative;
  for (size_t c = 0; c < scan.classes.size(); ++c) {
    const std::string dir = root + "/" + scan.classes[c];
    ES_ASSIGN_OR_RETURN(std::vector<std::string> names,
                        SortedEntries(dir, [](const fs::directory_entry& e) {
                          return IsImageName(e.path().filename().string());
                        }));
    if (names.empty()) {
      return absl::InvalidArgumentError(dir + ": empty class folder (no .png, .jpg or .jpeg file)");
    }
    if (files.size() + names.size() > kMaxImageFolderSamples) {
      return absl::InvalidArgumentError(
          absl::StrCat(root, ": more than ", kMaxImageFolderSamples, " images"));
    }
    for (const std::string& name : names) {
      files.push_back({dir + "/" + name, {}});
      relative.push_back(scan.classes[c] + "/" + name);
      scan.labels.push_back(static_cast<int32_t>(c));
    }
  }
  // Every file read, hashed and decoded once; the error reported is the
  // first file's in sample order, whichever thread met it.
  std::vector<Status> errors(files.size());
  std::vector<std::shared_ptr<const DecodedImage>> decoded(files.size());
  std::atomic<size_t> budget{options.cache_bytes};
  ForEachIndex(files.size(), options.threads, [&](size_t i) {
    StatusOr<std::string> bytes = ReadFile(files[i].path, kMaxImageFileBytes);
    if (!bytes.ok()) {
      errors[i] = bytes.status();
      return;
    }
    Sha256 h;
    h.Update(*bytes);
    files[i].sha256 = h.Digest();
    StatusOr<DecodedImage> image = DecodeImage(*bytes, options.channels, files[i].path);
    if (!image.ok()) {
      errors[i] = image.status();
      return;
    }
    // Kept for the cache while the budget lasts.
    size_t left = budget.load();
    while (left >= image->bytes() && !budget.compare_exchange_weak(left, left - image->bytes())) {
    }
    if (left >= image->bytes()) decoded[i] = std::make_shared<DecodedImage>(std::move(*image));
  });
  for (const Status& s : errors) ES_RETURN_IF_ERROR(s);
  Sha256 folder;
  folder.Update(std::string_view("easyscale-image-folder-v1\0", 26));
  for (size_t i = 0; i < files.size(); ++i) {
    folder.Update(relative[i]);
    folder.Update(std::string_view("\0", 1));
    folder.Update(files[i].sha256.data(), files[i].sha256.size());
  }
  scan.sha256 = folder.HexDigest();
  scan.folder = std::shared_ptr<ImageFolder>(new ImageFolder(std::move(files), options));
  {
    std::lock_guard<std::mutex> lock(scan.folder->mu_);
    for (size_t i = 0; i < decoded.size(); ++i) {
      if (decoded[i]) scan.folder->Insert(static_cast<uint32_t>(i), std::move(decoded[i]));
    }
  }
  return scan;
}

ImageFolder::ImageFolder(std::vector<File> files, const ImageFolderOptions& options)
    : files_(std::move(files)), options_(options) {
  for (int t = 0; t < options_.threads; ++t) threads_.emplace_back([this] { DecodeLoop(); });
}

ImageFolder::~ImageFolder() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
}

StatusOr<DecodedImage> ImageFolder::Decode(uint32_t index) const {
  const File& f = files_[index];
  ES_ASSIGN_OR_RETURN(std::string bytes, ReadFile(f.path, kMaxImageFileBytes));
  Sha256 h;
  h.Update(bytes);
  if (h.Digest() != f.sha256) {
    return absl::DataLossError(f.path +
                               ": changed since the data was checked (its SHA-256 is "
                               "part of the job's identity)");
  }
  return DecodeImage(bytes, options_.channels, f.path);
}

void ImageFolder::Insert(uint32_t index, std::shared_ptr<const DecodedImage> image) {
  if (cache_.count(index) != 0 || image->bytes() > options_.cache_bytes) return;
  while (cached_bytes_ + image->bytes() > options_.cache_bytes) {
    const auto oldest = cache_.find(lru_.front());
    cached_bytes_ -= oldest->second.image->bytes();
    cache_.erase(oldest);
    lru_.pop_front();
  }
  cached_bytes_ += image->bytes();
  lru_.push_back(index);
  cache_[index] = {std::move(image), std::prev(lru_.end())};
}

std::shared_ptr<const DecodedImage> ImageFolder::Get(uint32_t index) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return in_flight_.count(index) == 0; });
  if (auto it = cache_.find(index); it != cache_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru);
    return it->second.image;
  }
  if (auto it = failed_.find(index); it != failed_.end()) throw DataError(it->second);
  in_flight_.insert(index);
  lock.unlock();
  StatusOr<DecodedImage> image = Decode(index);
  lock.lock();
  in_flight_.erase(index);
  changed_.notify_all();
  if (!image.ok()) throw DataError(std::string(image.status().message()));
  auto shared = std::make_shared<const DecodedImage>(std::move(*image));
  Insert(index, shared);
  return shared;
}

void ImageFolder::Prefetch(const std::vector<uint32_t>& indices) {
  if (threads_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t i : indices) {
      if (cache_.count(i) == 0 && in_flight_.count(i) == 0) queue_.push_back(i);
    }
    // When decoding falls behind, the oldest requests are the ones batches
    // have already decoded for themselves.
    while (queue_.size() > kMaxQueued) queue_.pop_front();
  }
  changed_.notify_all();
}

void ImageFolder::DecodeLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const uint32_t index = queue_.front();
    queue_.pop_front();
    if (cache_.count(index) != 0 || in_flight_.count(index) != 0) continue;
    in_flight_.insert(index);
    lock.unlock();
    StatusOr<DecodedImage> image = Decode(index);
    lock.lock();
    in_flight_.erase(index);
    if (image.ok()) {
      Insert(index, std::make_shared<const DecodedImage>(std::move(*image)));
    } else {
      failed_[index] = std::string(image.status().message());
    }
    changed_.notify_all();
  }
}

}  // namespace easyscale::data
