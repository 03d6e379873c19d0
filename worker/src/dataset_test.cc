#include "easyscale/worker/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "easyscale/common/file_io.h"
#include "easyscale/worker/philox.h"

namespace easyscale {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("es-ds-" + std::to_string(getpid()) + "-" + name))
      .string();
}

TEST(Dataset, EncodeLoadRoundTrip) {
  Dataset d = MakeSyntheticDataset(50, 1, 8, 8, 3, 1);
  const std::string path = TempPath("rt");
  ASSERT_TRUE(WriteFileAtomic(path, EncodeDataset(d)).ok());
  auto back = LoadDataset(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->labels, d.labels);
  EXPECT_EQ(back->pixels, d.pixels);
  std::filesystem::remove(path);
}

TEST(Dataset, CorruptAndTruncatedFilesAreRejected) {
  std::string bytes = EncodeDataset(MakeSyntheticDataset(20, 1, 4, 4, 2, 1));
  const std::string path = TempPath("bad");
  std::string flipped = bytes;
  flipped[100] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(path, flipped).ok());
  EXPECT_NE(std::string(LoadDataset(path).status().message()).find("checksum mismatch"),
            std::string::npos);
  ASSERT_TRUE(WriteFileAtomic(path, bytes.substr(0, bytes.size() - 7)).ok());
  EXPECT_NE(std::string(LoadDataset(path).status().message()).find("truncated"), std::string::npos);
  ASSERT_TRUE(WriteFileAtomic(path, "not a dataset at all, just text......").ok());
  EXPECT_NE(std::string(LoadDataset(path).status().message()).find("bad magic"), std::string::npos);
  std::filesystem::remove(path);
  EXPECT_TRUE(absl::IsNotFound(LoadDataset(path).status()));
}

TEST(Dataset, ConvertRejectsMalformedJson) {
  const std::string dir = TempPath("digits");
  std::filesystem::create_directories(dir);
  for (int d = 0; d < 10; ++d)
    ASSERT_TRUE(WriteFileAtomic(dir + "/" + std::to_string(d) + ".json", "{\"data\":[0.5]}").ok());
  const Status s = ConvertMnistJson(dir, dir + "/out.esd");
  EXPECT_NE(std::string(s.message()).find("not a multiple of 784"), std::string::npos) << s;
  std::filesystem::remove_all(dir);
}

TEST(Dataset, SplitHasEveryClassAndIsDisjoint) {
  Dataset d;
  for (int i = 0; i < 10000; ++i)
    d.labels.push_back(static_cast<uint8_t>(i % 10));  // interleaved as converted
  DataSplit s = SplitTrainTest(d.count());
  EXPECT_EQ(s.test.size(), 1000u);
  EXPECT_EQ(s.train.size(), 9000u);
  std::set<int> classes;
  for (uint32_t i : s.test) classes.insert(d.labels[i]);
  EXPECT_EQ(classes.size(), 10u);
}

TEST(Dataset, EpochPermutationIsSeededPermutation) {
  auto p = EpochPermutation(1, 0, 1000);
  auto sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(p, EpochPermutation(1, 0, 1000));
  EXPECT_NE(p, EpochPermutation(1, 1, 1000));
  EXPECT_NE(p, EpochPermutation(2, 0, 1000));
}

TEST(Dataset, AugmentationShiftsWithinTwoPixels) {
  Dataset d;
  d.shape = {1, 8, 8};
  d.labels = {1};
  d.pixels.assign(64, 0);
  d.pixels[4 * 8 + 4] = 255;  // one bright pixel at (4, 4)
  Tensor x;
  std::vector<int32_t> labels;
  PhiloxStream aug(DeriveKey(1, 1), 0);
  std::set<int> positions;
  for (int i = 0; i < 200; ++i) {
    MakeBatch(d, {0}, &aug, &x, &labels);
    const int at =
        static_cast<int>(std::max_element(x.data.begin(), x.data.end()) - x.data.begin());
    EXPECT_LE(std::abs(at / 8 - 4), 2);
    EXPECT_LE(std::abs(at % 8 - 4), 2);
    positions.insert(at);
  }
  EXPECT_EQ(positions.size(), 25u);
  MakeBatch(d, {0}, nullptr, &x, &labels);
  EXPECT_EQ(x.data[4 * 8 + 4], 1.0f);
}

// Every pixel of a shifted image: its source pixel's value, or 0 where the
// shift brings in pixels from outside (all 25 shifts, both channels).
TEST(Dataset, AShiftedImageIsItsSourceMovedAndZeroFilled) {
  Dataset d;
  d.shape = {2, 7, 9};
  d.labels = {3};
  for (int i = 0; i < 2 * 7 * 9; ++i) d.pixels.push_back(static_cast<uint8_t>(i + 1));
  Tensor x;
  std::vector<int32_t> labels;
  PhiloxStream aug(DeriveKey(2, 1), 0);
  std::set<std::pair<int, int>> shifts;
  const float marker = static_cast<float>(d.pixels[3 * 9 + 4]) * (1.0f / 255);  // source (3, 4)
  for (int i = 0; i < 300; ++i) {
    MakeBatch(d, {0}, &aug, &x, &labels);
    const int at =
        static_cast<int>(std::find(x.data.begin(), x.data.end(), marker) - x.data.begin());
    ASSERT_LT(at, 7 * 9);
    const int sy = at / 9 - 3, sx = at % 9 - 4;
    shifts.insert({sy, sx});
    for (int c = 0; c < 2; ++c) {
      for (int y = 0; y < 7; ++y) {
        for (int xx = 0; xx < 9; ++xx) {
          const int yy = y - sy, xs = xx - sx;
          const float want =
              yy >= 0 && yy < 7 && xs >= 0 && xs < 9
                  ? static_cast<float>(d.pixels[(c * 7 + yy) * 9 + xs]) * (1.0f / 255)
                  : 0.0f;
          ASSERT_EQ(x.data[(c * 7 + y) * 9 + xx], want)
              << "shift (" << sy << ", " << sx << ") channel " << c << " at (" << y << ", " << xx
              << ")";
        }
      }
    }
  }
  EXPECT_EQ(shifts.size(), 25u);
}

}  // namespace
}  // namespace easyscale
