// image_pipeline_bench: samples per second of the image-folder pipeline on
// this CPU, as JSON lines: on the calling thread alone (read, checksum,
// decode, RandomResizedCrop + flip + resize + normalise: what one core
// delivers), the augmentation alone (images already decoded), and with the
// decoding pool prefetching the next batches as the worker does. The images
// are made here: JPEG files of CIFAR's size (3 x 32 x 32 by default) in 10
// class folders. bench/worker/image_pipeline.sh sets these figures against a
// training step of ResNet-18 in the same run.
//   image_pipeline_bench [--images 2048] [--size 32] [--out 32] [--batch 128]
//                        [--threads 2] [--epochs 3]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/testing/image_files.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/flags.h"
#include "easyscale/worker/dataset.h"
#include "easyscale/worker/philox.h"

using namespace easyscale;

namespace {

namespace fs = std::filesystem;

// Smooth gradients plus noise: JPEG files of a photo's size per pixel.
std::vector<uint8_t> Picture(int side, PhiloxStream& rng) {
  std::vector<uint8_t> rgb(static_cast<size_t>(side) * side * 3);
  const int a = static_cast<int>(rng.NextBelow(8)), b = static_cast<int>(rng.NextBelow(8));
  for (int y = 0; y < side; ++y) {
    for (int x = 0; x < side; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int v = (a * x + b * y + 60 * c) % 200 + static_cast<int>(rng.NextBelow(40));
        rgb[(static_cast<size_t>(y) * side + x) * 3 + c] = static_cast<uint8_t>(v);
      }
    }
  }
  return rgb;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Print(const std::string& what, int threads, size_t samples, double seconds) {
  std::printf("%s\n", nlohmann::json{{"bench", "image_pipeline"},
                                     {"measure", what},
                                     {"threads", threads},
                                     {"samples", samples},
                                     {"samples_per_s", samples / seconds}}
                          .dump()
                          .c_str());
}

int Run(int argc, char** argv) {
  int images = 2048, side = 32, out = 32, batch = 128, threads = 2, epochs = 3;
  FlagSet f("image_pipeline_bench [flags]: samples/s of the image-folder pipeline");
  f.Int("images", &images, "JPEG files made", 128, 1 << 20);
  f.Int("size", &side, "their side in pixels", 8, 4096);
  f.Int("out", &out, "the model's input side", 8, 4096);
  f.Int("batch", &batch, "samples a batch", 1, 8192);
  f.Int("threads", &threads, "decoding threads of the pool", 1, 256);
  f.Int("epochs", &epochs, "passes over the images per measure", 1, 1000);
  auto rest = f.Parse(argc, argv);
  if (!rest.ok() || f.help_requested()) {
    std::fprintf(stderr, "%s\n", rest.ok() ? f.Help().c_str() : rest.status().ToString().c_str());
    return rest.ok() ? 0 : 2;
  }
  const fs::path dir = fs::temp_directory_path() / ("es-image-bench-" + std::to_string(getpid()));
  PhiloxStream rng(DeriveKey(1, 2), 0);
  for (int i = 0; i < images; ++i) {
    const fs::path cls = dir / std::to_string(i % 10);
    fs::create_directories(cls);
    const std::string jpeg = data::testing::EncodeJpeg(Picture(side, rng), side, side, 3, 90);
    if (Status s = WriteFileAtomic((cls / (std::to_string(i) + ".jpg")).string(), jpeg); !s.ok()) {
      std::fprintf(stderr, "image_pipeline_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  auto load = [&](int pool, size_t cache) {
    UserDataOptions o;
    o.image_shape = [out] { return StatusOr<std::vector<int>>(std::vector<int>{3, out, out}); };
    o.decode_threads = pool;
    o.cache_bytes = cache;
    return LoadUserData(dir.string(), o);
  };
  // One training pass per epoch, the samples in a seeded order, batch after
  // batch; `ahead` batches are handed to the pool before each is made.
  auto measure = [&](const Dataset& d, int ahead) {
    Tensor x;
    std::vector<int32_t> labels;
    PhiloxStream aug(DeriveKey(3, 0), 0);
    size_t samples = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int e = 0; e < epochs; ++e) {
      const std::vector<uint32_t> order = EpochPermutation(7, e, static_cast<uint32_t>(d.count()));
      auto batch_at = [&](size_t b) {
        const size_t begin = std::min(order.size(), b * batch);
        const size_t end = std::min(order.size(), begin + batch);
        return std::vector<uint32_t>(order.begin() + begin, order.begin() + end);
      };
      for (size_t b = 0; b * batch < order.size(); ++b) {
        for (int k = 1; k <= ahead; ++k) PrefetchSamples(d, batch_at(b + k));
        const std::vector<uint32_t> samples_b = batch_at(b);
        MakeBatch(d, samples_b, &aug, &x, &labels);
        samples += samples_b.size();
      }
    }
    return std::pair{samples, Seconds(t0)};
  };
  const auto t_check = std::chrono::steady_clock::now();
  auto per_core = load(0, 0);  // no cache: every sample read and decoded on this thread
  const double check_s = Seconds(t_check);
  auto cached = load(0, size_t{1} << 34);
  const size_t window = static_cast<size_t>(4) * batch * 3 * side * side;  // 4 batches decoded
  auto pooled = load(threads, window);
  for (const auto* d : {&per_core, &cached, &pooled}) {
    if (!d->ok()) {
      std::fprintf(stderr, "image_pipeline_bench: %s\n", d->status().ToString().c_str());
      return 1;
    }
  }
  Print("check_on_load (read, hash, decode every file)", 0, per_core->count(), check_s);
  auto [n1, s1] = measure(**&per_core, 0);
  Print("per_core (read, verify, decode, crop, flip, resize, normalise)", 1, n1, s1);
  auto [n2, s2] = measure(**&cached, 0);
  Print("augment_only (crop, flip, resize, normalise of decoded images)", 1, n2, s2);
  auto [n3, s3] = measure(**&pooled, 2);
  Print("pool (decoding prefetched 2 batches ahead, batches made on this thread)", threads, n3, s3);
  fs::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
