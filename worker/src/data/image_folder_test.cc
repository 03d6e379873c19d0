#include "data/image_folder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "data/image_transform.h"
#include "data/testing/image_files.h"
#include "easyscale/common/file_io.h"
#include "easyscale/worker/dataset.h"
#include "easyscale/worker/philox.h"

namespace easyscale::data {
namespace {

namespace fs = std::filesystem;

class ImageFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (fs::temp_directory_path() / ("es-images-" + std::to_string(getpid()))).string();
    fs::remove_all(root_);
    // Two classes of differently sized images, PNG and JPEG.
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < 6; ++i) {
        const int h = 20 + 3 * i, w = 30 - 2 * i;
        std::vector<uint8_t> rgb(static_cast<size_t>(h) * w * 3);
        for (size_t k = 0; k < rgb.size(); ++k) rgb[k] = static_cast<uint8_t>(k * (c + 3) + i);
        const std::string name = std::string(c == 0 ? "cat" : "dog") + "/" + std::to_string(i);
        Write(name + (i % 2 ? ".png" : ".JPG"),
              i % 2 ? testing::EncodePng(rgb, h, w, 3) : testing::EncodeJpeg(rgb, h, w, 3));
      }
    }
    Write("dog/notes.txt", "not an image: ignored");
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const std::string& relative, const std::string& bytes) {
    fs::create_directories(fs::path(root_ + "/" + relative).parent_path());
    ASSERT_TRUE(WriteFileAtomic(root_ + "/" + relative, bytes).ok());
  }

  StatusOr<Dataset> Load(int threads, size_t cache_bytes = size_t{1} << 20) {
    UserDataOptions o;
    o.image_shape = [] { return StatusOr<std::vector<int>>(std::vector<int>{3, 16, 16}); };
    o.decode_threads = threads;
    o.cache_bytes = cache_bytes;
    return LoadUserData(root_, o);
  }

  std::string root_;
};

TEST_F(ImageFolderTest, ClassesAreSortedFoldersAndSamplesSortedFiles) {
  auto d = Load(2);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->classes, 2);
  EXPECT_EQ(d->labels, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(d->shape, (std::vector<int>{3, 16, 16}));
  EXPECT_EQ(d->sha256.size(), 64u);
  // The checksum follows the bytes: another image, another identity.
  Write("cat/0.JPG", testing::EncodePng(std::vector<uint8_t>(300, 9), 10, 10, 3));
  auto other = Load(2);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->sha256, d->sha256);
}

// Decoding threads and the cache change no bit: the same draws give the
// same batch whether images come from the pool, the cache or the caller.
TEST_F(ImageFolderTest, ThreadsAndCacheChangeNoBit) {
  std::vector<std::vector<float>> batches;
  for (auto [threads, cache] :
       {std::pair{0, size_t{0}}, std::pair{2, size_t{1} << 20}, std::pair{3, size_t{2000}}}) {
    auto d = Load(threads, cache);
    ASSERT_TRUE(d.ok()) << d.status();
    const std::vector<uint32_t> samples = {3, 7, 0, 11, 5, 5, 9};
    PrefetchSamples(*d, samples);
    PhiloxStream aug(DeriveKey(3, 4), 0);
    Tensor x, eval;
    std::vector<int32_t> labels;
    MakeBatch(*d, samples, &aug, &x, &labels);
    MakeBatch(*d, samples, nullptr, &eval, &labels);
    x.data.insert(x.data.end(), eval.data.begin(), eval.data.end());
    batches.push_back(x.data);
    EXPECT_EQ(labels, (std::vector<int32_t>{0, 1, 0, 1, 0, 0, 1}));
  }
  EXPECT_EQ(batches[0], batches[1]);
  EXPECT_EQ(batches[0], batches[2]);
  for (float v : batches[0]) ASSERT_TRUE(v >= 0.0f && v <= 1.0f) << v;
}

TEST_F(ImageFolderTest, AugmentationIsTheDocumentedCropAndFlip) {
  auto d = Load(0);
  ASSERT_TRUE(d.ok()) << d.status();
  PhiloxStream aug(DeriveKey(8, 1), 0), replay(DeriveKey(8, 1), 0);
  Tensor x;
  std::vector<int32_t> labels;
  MakeBatch(*d, {1}, &aug, &x, &labels);
  // The same draws by hand: the crop, then the flip, then x / 255.
  const auto image = d->images->Get(1);
  const CropBox box = RandomResizedCrop(replay, image->height, image->width);
  const bool flip = replay.NextBelow(2) == 1;
  std::vector<float> want(3 * 16 * 16);
  ResizeCrop(*image, box, flip, 16, 16, want.data());
  for (float& v : want) v = v * (1.0f / 255.0f);
  EXPECT_EQ(x.data, want);
}

TEST_F(ImageFolderTest, AFileChangedAfterTheCheckIsAnError) {
  auto d = Load(0, 0);  // no cache: every batch reads the files
  ASSERT_TRUE(d.ok()) << d.status();
  Write("dog/3.png", testing::EncodePng(std::vector<uint8_t>(300, 1), 10, 10, 3));
  Tensor x;
  std::vector<int32_t> labels;
  try {
    MakeBatch(*d, {9}, nullptr, &x, &labels);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("dog/3.png: changed since the data was checked"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(ImageFolderTest, BadFoldersAreOneErrorNamingTheFile) {
  std::string jpeg = testing::EncodeJpeg(std::vector<uint8_t>(64 * 64 * 3, 100), 64, 64, 3);
  Write("dog/2.JPG", jpeg.substr(0, jpeg.size() / 2));
  auto cut = Load(2);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(std::string(cut.status().message()).rfind(root_ + "/dog/2.JPG: corrupt JPEG: ", 0), 0u)
      << cut.status();
  fs::remove(root_ + "/dog/2.JPG");

  ASSERT_EQ(::mkfifo((root_ + "/dog/fifo.png").c_str(), 0600), 0);
  auto fifo = Load(2);
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.status().message(),
            "reading " + root_ + "/dog/fifo.png: is a FIFO, not a regular file");
  fs::remove(root_ + "/dog/fifo.png");

  fs::create_directories(root_ + "/emu");
  auto empty = Load(2);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(),
            root_ + "/emu: empty class folder (no .png, .jpg or .jpeg file)");
  fs::remove_all(root_ + "/emu");

  {  // a sparse file over the size bound
    Write("dog/huge.png", "");
    ASSERT_EQ(::truncate((root_ + "/dog/huge.png").c_str(), kMaxImageFileBytes + 1), 0);
  }
  auto huge = Load(2);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(std::string(huge.status().message()).find("dog/huge.png: larger than"),
            std::string::npos)
      << huge.status();
  fs::remove(root_ + "/dog/huge.png");

  fs::remove_all(root_ + "/cat");
  fs::remove_all(root_ + "/dog");
  Write("loose.png", testing::EncodePng(std::vector<uint8_t>(3, 0), 1, 1, 3));
  auto none = Load(2);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            root_ +
                ": no class folders (an image folder holds one sub-folder of images per "
                "class)");
}

}  // namespace
}  // namespace easyscale::data
