#include "easyscale/worker/dataset.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

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
      d.labels.push_back(static_cast<uint8_t>(digit));
      d.pixels.insert(d.pixels.end(), v.begin() + k * kPixels, v.begin() + (k + 1) * kPixels);
    }
  }
  return WriteFileAtomic(out_path, EncodeDataset(d));
}

std::string EncodeDataset(const Dataset& d) {
  ByteWriter w;
  std::string out(kMagic, sizeof kMagic);
  w.U32(kVersion);
  w.U32(static_cast<uint32_t>(d.count()));
  w.U32(static_cast<uint32_t>(d.channels));
  w.U32(static_cast<uint32_t>(d.height));
  w.U32(static_cast<uint32_t>(d.width));
  w.U32(static_cast<uint32_t>(d.classes));
  out += w.bytes();
  out.append(reinterpret_cast<const char*>(d.labels.data()), d.labels.size());
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
  d.channels = static_cast<int>(c);
  d.height = static_cast<int>(h);
  d.width = static_cast<int>(w);
  d.classes = static_cast<int>(classes);
  const char* p = s.data() + kHeaderSize;
  d.labels.assign(p, p + count);
  for (uint8_t l : d.labels) {
    if (l >= classes) return absl::DataLossError("data file " + path + ": label out of range");
  }
  p += count;
  d.pixels.assign(p, p + static_cast<size_t>(count) * c * h * w);
  d.sha256 = Sha256Hex(s.data(), s.size());
  return d;
}

Dataset MakeSyntheticDataset(size_t count, int channels, int height, int width, int classes,
                             uint64_t seed) {
  Dataset d;
  d.channels = channels;
  d.height = height;
  d.width = width;
  d.classes = classes;
  const std::string params = absl::StrCat("synthetic count=", count, " shape=", channels, "x",
                                          height, "x", width, " classes=", classes, " seed=", seed);
  d.sha256 = Sha256Hex(params.data(), params.size());
  PhiloxStream rng(DeriveKey(seed, 0x5EED), 0);
  d.labels.resize(count);
  d.pixels.resize(count * d.sample_size());
  for (size_t i = 0; i < count; ++i) {
    const uint32_t label = rng.NextBelow(static_cast<uint32_t>(classes));
    d.labels[i] = static_cast<uint8_t>(label);
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
  d.channels = 1;
  d.height = 1;
  d.width = length;
  d.classes = classes;
  d.tokens = true;
  const std::string params = absl::StrCat("tokens count=", count, " length=", length,
                                          " vocab=", vocab, " classes=", classes, " seed=", seed);
  d.sha256 = Sha256Hex(params.data(), params.size());
  PhiloxStream rng(DeriveKey(seed, 0x70CE), 0);
  const uint32_t band = static_cast<uint32_t>(vocab / classes);
  d.labels.resize(count);
  d.pixels.resize(count * d.sample_size());
  for (size_t i = 0; i < count; ++i) {
    const uint32_t label = rng.NextBelow(static_cast<uint32_t>(classes));
    d.labels[i] = static_cast<uint8_t>(label);
    for (int t = 0; t < length; ++t) {
      const bool in_band = rng.NextBelow(2) == 0;
      const uint32_t token = in_band ? label * band + rng.NextBelow(band)
                                     : rng.NextBelow(static_cast<uint32_t>(vocab));
      d.pixels[i * d.sample_size() + static_cast<size_t>(t)] = static_cast<uint8_t>(token);
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

void MakeBatch(const Dataset& d, const std::vector<uint32_t>& samples, PhiloxStream* aug, Tensor* x,
               std::vector<int32_t>* labels) {
  const int B = static_cast<int>(samples.size()), C = d.channels, H = d.height, W = d.width;
  x->Resize({B, C, H, W});
  labels->resize(samples.size());
  const float scale = d.tokens ? 1.0f : 1.0f / 255.0f;
  if (d.tokens) aug = nullptr;  // a shifted sequence is another sequence
  for (int b = 0; b < B; ++b) {
    const uint8_t* src = d.pixels.data() + static_cast<size_t>(samples[b]) * d.sample_size();
    (*labels)[b] = d.labels[samples[b]];
    int sy = 0, sx = 0;
    if (aug != nullptr) {
      sy = static_cast<int>(aug->NextBelow(5)) - 2;
      sx = static_cast<int>(aug->NextBelow(5)) - 2;
    }
    float* dst = x->ptr() + static_cast<size_t>(b) * d.sample_size();
    for (int c = 0; c < C; ++c) {
      for (int y = 0; y < H; ++y) {
        for (int xx = 0; xx < W; ++xx) {
          const int yy = y - sy, xs = xx - sx;
          const bool inside = yy >= 0 && yy < H && xs >= 0 && xs < W;
          dst[(c * H + y) * W + xx] =
              inside ? static_cast<float>(src[(c * H + yy) * W + xs]) * scale : 0.0f;
        }
      }
    }
  }
}

}  // namespace easyscale
