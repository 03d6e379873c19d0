#include "easyscale/worker/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "data/image_folder.h"
#include "data/image_transform.h"
#include "data/tensor_files.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/sha256.h"
#include "easyscale/worker/philox.h"
#include "easyscale/worker/serialize.h"

namespace easyscale {
namespace {

constexpr char kMagic[8] = {'E', 'S', 'D', 'I', 'G', 'I', 'T', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderSize = 8 + 6 * 4;
// ReadFile's bounds: the npm package's digits files are about 2.3 MB each.
constexpr size_t kMaxMnistJsonBytes = 256 << 20;

}  // namespace

Status ConvertMnistJson(const std::string& digits_dir, const std::string& out_path) {
  constexpr int kSide = 28, kPixels = kSide * kSide;
  std::vector<std::vector<uint8_t>> per_digit(10);
  for (int digit = 0; digit < 10; ++digit) {
    const std::string path = digits_dir + "/" + std::to_string(digit) + ".json";
    ES_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxMnistJsonBytes));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return absl::DataLossError(path + ": not valid JSON");
    if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) {
      return absl::DataLossError(path + ": data: must be a list of pixel values");
    }
    const auto& data = j["data"];
    if (data.empty() || data.size() % kPixels != 0) {
      return absl::DataLossError(
          absl::StrCat(path, ": data: ", data.size(), " values is not a multiple of 784"));
    }
    auto& out = per_digit[digit];
    out.reserve(data.size());
    for (size_t i = 0; i < data.size(); ++i) {
      if (!data[i].is_number())
        return absl::DataLossError(absl::StrCat(path, ": data[", i, "]: not a number"));
      const double v = data[i].get<double>();
      if (!(v >= 0.0 && v <= 1.0)) {
        return absl::DataLossError(absl::StrCat(path, ": data[", i, "]: ", v, " outside [0, 1]"));
      }
      out.push_back(static_cast<uint8_t>(std::lround(v * 255.0)));
    }
  }
  Dataset d;
  size_t max_per_digit = 0;
  for (const auto& v : per_digit) max_per_digit = std::max(max_per_digit, v.size() / kPixels);
  for (size_t k = 0; k < max_per_digit; ++k) {
    for (int digit = 0; digit < 10; ++digit) {
      const auto& v = per_digit[digit];
      if ((k + 1) * kPixels > v.size()) continue;
      d.labels.push_back(digit);
      d.pixels.insert(d.pixels.end(), v.begin() + k * kPixels, v.begin() + (k + 1) * kPixels);
    }
  }
  return WriteFileAtomic(out_path, EncodeDataset(d));
}

size_t Dataset::sample_size() const {
  size_t n = 1;
  for (int dim : shape) n *= static_cast<size_t>(dim);
  return n;
}

std::string EncodeDataset(const Dataset& d) {
  ES_CHECK(d.type == SampleType::kPixels && d.shape.size() == 3 && d.classes <= 256)
      << "a digits file holds [C, H, W] pixels of at most 256 classes";
  ByteWriter w;
  std::string out(kMagic, sizeof kMagic);
  w.U32(kVersion);
  w.U32(static_cast<uint32_t>(d.count()));
  for (int dim : d.shape) w.U32(static_cast<uint32_t>(dim));
  w.U32(static_cast<uint32_t>(d.classes));
  out += w.bytes();
  for (int32_t label : d.labels) out.push_back(static_cast<char>(label));
  out.append(reinterpret_cast<const char*>(d.pixels.data()), d.pixels.size());
  Sha256 h;
  h.Update(out);
  const auto digest = h.Digest();
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return out;
}

StatusOr<Dataset> LoadDataset(const std::string& path) {
  auto text = ReadFile(path, kMaxDataFileBytes);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat("data file ", path, ": ", text.status().message(),
                                            " (run scripts/setup.sh, or pass --data)"));
  }
  if (!text.ok()) {
    return Status(text.status().code(),
                  absl::StrCat("data file ", path, ": ", text.status().message()));
  }
  const std::string& s = *text;
  if (s.size() < kHeaderSize + 32 || std::memcmp(s.data(), kMagic, sizeof kMagic) != 0) {
    return absl::DataLossError("data file " + path + ": not an EasyScale digits file (bad magic)");
  }
  ByteReader r(std::string_view(s).substr(8, kHeaderSize - 8), "data file " + path);
  uint32_t version, count, c, h, w, classes;
  ES_RETURN_IF_ERROR(r.U32(&version, "version"));
  ES_RETURN_IF_ERROR(r.U32(&count, "count"));
  ES_RETURN_IF_ERROR(r.U32(&c, "channels"));
  ES_RETURN_IF_ERROR(r.U32(&h, "height"));
  ES_RETURN_IF_ERROR(r.U32(&w, "width"));
  ES_RETURN_IF_ERROR(r.U32(&classes, "classes"));
  if (version != kVersion) {
    return absl::DataLossError(
        absl::StrCat("data file ", path, ": version ", version, ", want ", kVersion));
  }
  if (count == 0 || c == 0 || h == 0 || w == 0 || classes < 2 || c * h * w > (1u << 24)) {
    return absl::DataLossError("data file " + path + ": implausible header");
  }
  const size_t want = kHeaderSize + count + static_cast<size_t>(count) * c * h * w + 32;
  if (s.size() != want) {
    return absl::DataLossError(absl::StrCat("data file ", path, ": size ", s.size(),
                                            " bytes, header says ", want, " (truncated?)"));
  }
  if (Sha256Hex(s.data(), s.size() - 32) !=
      ToHex(reinterpret_cast<const uint8_t*>(s.data()) + s.size() - 32, 32)) {
    return absl::DataLossError("data file " + path + ": checksum mismatch (corrupt file)");
  }
  Dataset d;
  d.shape = {static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)};
  d.classes = static_cast<int>(classes);
  const uint8_t* p = reinterpret_cast<const uint8_t*>(s.data()) + kHeaderSize;
  d.labels.assign(p, p + count);
  for (int32_t l : d.labels) {
    if (l >= static_cast<int32_t>(classes))
      return absl::DataLossError("data file " + path + ": label out of range");
  }
  p += count;
  d.pixels.assign(p, p + static_cast<size_t>(count) * c * h * w);
  d.sha256 = Sha256Hex(s.data(), s.size());
  return d;
}

Dataset MakeSyntheticDataset(size_t count, int channels, int height, int width, int classes,
                             uint64_t seed) {
  Dataset d;
  d.shape = {channels, height, width};
  d.classes = classes;
  const std::string params = absl::StrCat("synthetic count=", count, " shape=", channels, "x",
                                          height, "x", width, " classes=", classes, " seed=", seed);
  d.sha256 = Sha256Hex(params.data(), params.size());
  PhiloxStream rng(DeriveKey(seed, 0x5EED), 0);
  d.labels.resize(count);
  d.pixels.resize(count * d.sample_size());
  for (size_t i = 0; i < count; ++i) {
    const uint32_t label = rng.NextBelow(static_cast<uint32_t>(classes));
    d.labels[i] = static_cast<int32_t>(label);
    // A class-dependent brightness pattern plus noise, so the task is learnable.
    for (size_t j = 0; j < d.sample_size(); ++j) {
      const uint32_t base = ((j * 7 + label * 31) % 97) < 40 ? 160u : 30u;
      d.pixels[i * d.sample_size() + j] = static_cast<uint8_t>(base + rng.NextBelow(64));
    }
  }
  return d;
}

Dataset MakeTokenDataset(size_t count, int length, int vocab, int classes, uint64_t seed) {
  Dataset d;
  d.type = SampleType::kTokenIds;
  d.shape = {length};
  d.classes = classes;
  const std::string params = absl::StrCat("tokens count=", count, " length=", length,
                                          " vocab=", vocab, " classes=", classes, " seed=", seed);
  d.sha256 = Sha256Hex(params.data(), params.size());
  PhiloxStream rng(DeriveKey(seed, 0x70CE), 0);
  const uint32_t band = static_cast<uint32_t>(vocab / classes);
  d.labels.resize(count);
  d.token_ids.resize(count * d.sample_size());
  for (size_t i = 0; i < count; ++i) {
    const uint32_t label = rng.NextBelow(static_cast<uint32_t>(classes));
    d.labels[i] = static_cast<int32_t>(label);
    for (int t = 0; t < length; ++t) {
      const bool in_band = rng.NextBelow(2) == 0;
      const uint32_t token = in_band ? label * band + rng.NextBelow(band)
                                     : rng.NextBelow(static_cast<uint32_t>(vocab));
      d.token_ids[i * d.sample_size() + static_cast<size_t>(t)] = token;
    }
  }
  return d;
}

DataSplit SplitTrainTest(size_t count) {
  DataSplit s;
  for (uint32_t i = 0; i < count; ++i) ((i / 10) % 10 == 9 ? s.test : s.train).push_back(i);
  return s;
}

uint64_t EstShardSize(const DataSplit& split, int total_ests) {
  return split.train.size() / static_cast<uint64_t>(total_ests);
}

std::vector<uint32_t> EpochPermutation(uint64_t seed, uint64_t epoch, uint32_t n) {
  std::vector<uint32_t> perm(n);
  for (uint32_t i = 0; i < n; ++i) perm[i] = i;
  PhiloxStream rng(DeriveKey(seed, 0xE90C0000ull + epoch), 0);
  for (uint32_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.NextBelow(i)]);
  return perm;
}

StatusOr<Dataset> LoadUserData(const std::string& path, const UserDataOptions& options) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError("--data " + path + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    struct stat npy {};
    if (::stat((path + "/inputs.npy").c_str(), &npy) == 0) return data::LoadNpyFolder(path);
    ES_ASSIGN_OR_RETURN(const std::vector<int> shape, options.image_shape());
    if (shape.size() != 3) {
      return absl::InvalidArgumentError("--data " + path +
                                        ": an image folder needs a model of [C, H, W] image input");
    }
    data::ImageFolderOptions o;
    o.channels = shape[0];
    o.threads = options.decode_threads;
    o.cache_bytes = options.cache_bytes;
    if (o.channels != 1 && o.channels != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data ", path, ": the model takes ", o.channels,
                       " channels; images decode to 1 (grey) or 3 (RGB)"));
    }
    ES_ASSIGN_OR_RETURN(data::ImageFolder::Scan scan, data::ImageFolder::Open(path, o));
    Dataset d;
    d.shape = shape;
    d.classes = static_cast<int>(scan.classes.size());
    d.labels = std::move(scan.labels);
    d.images = std::move(scan.folder);
    d.sha256 = std::move(scan.sha256);
    return d;
  }
  const auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  // Refused before anything opens it: a FIFO would block, a device never end.
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError("--data " + path + ": is " +
                                      (S_ISFIFO(st.st_mode)   ? "a FIFO"
                                       : S_ISSOCK(st.st_mode) ? "a socket"
                                                              : "a device") +
                                      ", not a regular file or a folder");
  }
  if (ends_with(".safetensors")) return data::LoadSafetensors(path);
  if (ends_with(".esd")) return LoadDataset(path);
  return absl::InvalidArgumentError(
      "--data " + path +
      ": not a folder (images in class folders, or inputs.npy and labels.npy), a .safetensors "
      "file or a .esd digits file");
}

Status SetNormalization(const std::vector<double>& mean, const std::vector<double>& std,
                        Dataset* d) {
  if (mean.empty()) return absl::OkStatus();
  if (d->type != SampleType::kPixels) {
    return absl::InvalidArgumentError(
        "--normalize-mean/--normalize-std: only uint8 pixels are normalised; this data's samples "
        "are float32 values or token ids, used as they are");
  }
  const size_t channels = static_cast<size_t>(d->shape[0]);
  for (const auto& [flag, values] :
       {std::pair{"--normalize-mean", &mean}, std::pair{"--normalize-std", &std}}) {
    if (d->shape.size() != 3 || (values->size() != 1 && values->size() != channels)) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": ", values->size(), " values; want 1 or one per channel of the ",
          d->shape.size() == 3 ? absl::StrCat(channels, "-channel") : "non-image", " samples"));
    }
  }
  d->mean.clear();
  d->std.clear();
  for (size_t c = 0; c < channels; ++c) {
    d->mean.push_back(static_cast<float>(mean[mean.size() == 1 ? 0 : c]));
    d->std.push_back(static_cast<float>(std[std.size() == 1 ? 0 : c]));
  }
  return absl::OkStatus();
}

namespace {

// A [C, H, W] sample shifted by (sy, sx), zero-filled, each value converted by
// `value` (the digits' augmentation, for every in-memory image).
// Each row is zeros, the converted run of source pixels, zeros: loops without
// a test per pixel, which the compiler vectorises (a 224x224 batch of 64 is
// 9.6 M pixels a step).
template <typename T, typename Value>
void ShiftedImage(const T* src, int C, int H, int W, int sy, int sx, Value value, float* dst) {
  const int x_begin = std::clamp(sx, 0, W), x_end = std::clamp(W + sx, 0, W);
  for (int c = 0; c < C; ++c) {
    for (int y = 0; y < H; ++y) {
      float* row = dst + (static_cast<size_t>(c) * H + y) * W;
      const int yy = y - sy;
      if (yy < 0 || yy >= H) {
        std::fill(row, row + W, 0.0f);
        continue;
      }
      const T* from = src + (static_cast<size_t>(c) * H + yy) * W;
      std::fill(row, row + x_begin, 0.0f);
      for (int xx = x_begin; xx < x_end; ++xx) row[xx] = value(from[xx - sx]);
      std::fill(row + x_end, row + W, 0.0f);
    }
  }
}

// (x - mean[c]) / std[c] over a [C, H*W] sample, when the data is normalised.
void Normalize(const Dataset& d, float* x) {
  if (d.mean.empty()) return;
  const size_t plane = d.sample_size() / d.mean.size();
  for (size_t c = 0; c < d.mean.size(); ++c) {
    for (size_t i = 0; i < plane; ++i) x[c * plane + i] = (x[c * plane + i] - d.mean[c]) / d.std[c];
  }
}

}  // namespace

void MakeBatch(const Dataset& d, const std::vector<uint32_t>& samples, PhiloxStream* aug, Tensor* x,
               std::vector<int32_t>* labels) {
  const int B = static_cast<int>(samples.size());
  std::vector<int> shape = {B};
  shape.insert(shape.end(), d.shape.begin(), d.shape.end());
  x->Resize(shape);
  labels->resize(samples.size());
  const size_t n = d.sample_size();
  constexpr float kPixelScale = 1.0f / 255.0f;
  const bool image = d.shape.size() == 3 && d.type != SampleType::kTokenIds;
  for (int b = 0; b < B; ++b) {
    const size_t offset = static_cast<size_t>(samples[b]) * n;
    float* dst = x->ptr() + static_cast<size_t>(b) * n;
    (*labels)[b] = d.labels[samples[b]];
    if (d.images) {
      const std::shared_ptr<const data::DecodedImage> decoded = d.images->Get(samples[b]);
      const int H = d.shape[1], W = d.shape[2];
      data::CropBox box = data::CenterBox(decoded->height, decoded->width, H, W);
      bool flip = false;
      if (aug != nullptr) {
        box = data::RandomResizedCrop(*aug, decoded->height, decoded->width);
        flip = aug->NextBelow(2) == 1;
      }
      data::ResizeCrop(*decoded, box, flip, H, W, dst);
      for (size_t i = 0; i < n; ++i) dst[i] = dst[i] * kPixelScale;
      Normalize(d, dst);
      continue;
    }
    if (d.type == SampleType::kTokenIds) {
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(d.token_ids[offset + i]);
      continue;
    }
    if (!image) {  // rows of float32 (or uint8) values, never changed
      for (size_t i = 0; i < n; ++i) {
        dst[i] = d.type == SampleType::kFloat32
                     ? d.floats[offset + i]
                     : static_cast<float>(d.pixels[offset + i]) * kPixelScale;
      }
      Normalize(d, dst);
      continue;
    }
    int sy = 0, sx = 0;
    if (aug != nullptr) {
      sy = static_cast<int>(aug->NextBelow(5)) - 2;
      sx = static_cast<int>(aug->NextBelow(5)) - 2;
    }
    const int C = d.shape[0], H = d.shape[1], W = d.shape[2];
    if (d.type == SampleType::kFloat32) {
      ShiftedImage(
          d.floats.data() + offset, C, H, W, sy, sx, [](float v) { return v; }, dst);
    } else {
      ShiftedImage(
          d.pixels.data() + offset, C, H, W, sy, sx,
          [](uint8_t v) { return static_cast<float>(v) * kPixelScale; }, dst);
      Normalize(d, dst);
    }
  }
}

void PrefetchSamples(const Dataset& d, const std::vector<uint32_t>& samples) {
  if (d.images) d.images->Prefetch(samples);
}

}  // namespace easyscale
