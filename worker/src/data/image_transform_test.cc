#include "data/image_transform.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace easyscale::data {
namespace {

DecodedImage RandomImage(int height, int width, int channels, uint64_t seed) {
  DecodedImage image{height, width, channels, {}};
  PhiloxStream rng(DeriveKey(seed, 1), 0);
  image.pixels.resize(static_cast<size_t>(height) * width * channels);
  for (uint8_t& p : image.pixels) p = static_cast<uint8_t>(rng.NextBelow(256));
  return image;
}

// Bilinear resize (align_corners = false) the plain way, in double.
double Reference(const DecodedImage& image, const CropBox& box, int out_h, int out_w, int c, int y,
                 int x) {
  auto source = [](int o, int in, int out) {
    const double s = std::max(0.0, (o + 0.5) * in / out - 0.5);
    const int lo = static_cast<int>(std::floor(s));
    return std::tuple{lo, std::min(lo + 1, in - 1), s - lo};
  };
  const auto [y0, y1, wy] = source(y, box.height, out_h);
  const auto [x0, x1, wx] = source(x, box.width, out_w);
  auto p = [&](int yy, int xx) {
    return double(
        image.pixels[((box.top + yy) * image.width + box.left + xx) * image.channels + c]);
  };
  return (1 - wy) * ((1 - wx) * p(y0, x0) + wx * p(y0, x1)) +
         wy * ((1 - wx) * p(y1, x0) + wx * p(y1, x1));
}

TEST(ResizeCrop, MatchesAStraightforwardBilinearResize) {
  const DecodedImage image = RandomImage(37, 53, 3, 7);
  const CropBox boxes[] = {{0, 0, 37, 53}, {5, 9, 20, 31}, {30, 40, 7, 13}, {1, 2, 3, 3}};
  for (const CropBox& box : boxes) {
    for (auto [h, w] : {std::pair{16, 16}, std::pair{32, 24}, std::pair{40, 61}}) {
      std::vector<float> out(static_cast<size_t>(3) * h * w), mirrored(out.size());
      ResizeCrop(image, box, false, h, w, out.data());
      ResizeCrop(image, box, true, h, w, mirrored.data());
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < h; ++y) {
          for (int x = 0; x < w; ++x) {
            const size_t at = (static_cast<size_t>(c) * h + y) * w + x;
            ASSERT_NEAR(out[at], Reference(image, box, h, w, c, y, x), 2e-3)
                << box.top << "," << box.left << " " << h << "x" << w << " at " << c << "," << y
                << "," << x;
            ASSERT_EQ(mirrored[at], out[at - x + (w - 1 - x)]);
          }
        }
      }
    }
  }
}

TEST(ResizeCrop, SameSizeIsTheCropItself) {
  const DecodedImage image = RandomImage(10, 12, 1, 3);
  std::vector<float> out(4 * 5);
  ResizeCrop(image, {3, 6, 4, 5}, false, 4, 5, out.data());
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 5; ++x) ASSERT_EQ(out[y * 5 + x], image.pixels[(3 + y) * 12 + 6 + x]);
  }
}

TEST(RandomResizedCrop, DrawsBoxesInTorchvisionsRanges) {
  PhiloxStream rng(DeriveKey(5, 9), 0), again(DeriveKey(5, 9), 0);
  int fallbacks = 0;
  for (int i = 0; i < 2000; ++i) {
    const CropBox box = RandomResizedCrop(rng, 60, 80);
    ASSERT_EQ(box, RandomResizedCrop(again, 60, 80));
    ASSERT_GE(box.top, 0);
    ASSERT_GE(box.left, 0);
    ASSERT_LE(box.top + box.height, 60);
    ASSERT_LE(box.left + box.width, 80);
    const double area = double(box.height) * box.width / (60.0 * 80.0);
    const double ratio = double(box.width) / box.height;
    if (box == CropBox{0, 0, 60, 80}) {
      ++fallbacks;
      continue;
    }
    // Rounding moves a small box's area and ratio a little off the ranges.
    EXPECT_GE(area, 0.07);
    EXPECT_GE(ratio, 0.7);
    EXPECT_LE(ratio, 1.45);
  }
  EXPECT_LT(fallbacks, 40);
  // No attempt can fit a 1-pixel-high strip: torchvision's central fallback.
  PhiloxStream strip(DeriveKey(1, 1), 0);
  EXPECT_EQ(RandomResizedCrop(strip, 1, 1000), (CropBox{0, 499, 1, 1}));
  PhiloxStream tall(DeriveKey(1, 1), 0);
  EXPECT_EQ(RandomResizedCrop(tall, 1000, 1), (CropBox{499, 0, 1, 1}));
}

TEST(CenterBox, IsTheLargestCentredBoxOfTheOutputsAspect) {
  EXPECT_EQ(CenterBox(100, 50, 32, 32), (CropBox{25, 0, 50, 50}));
  EXPECT_EQ(CenterBox(50, 100, 32, 32), (CropBox{0, 25, 50, 50}));
  EXPECT_EQ(CenterBox(28, 28, 28, 28), (CropBox{0, 0, 28, 28}));
  EXPECT_EQ(CenterBox(60, 80, 30, 20), (CropBox{0, 20, 60, 40}));
}

}  // namespace
}  // namespace easyscale::data
