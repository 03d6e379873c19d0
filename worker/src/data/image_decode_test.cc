#include "data/image_decode.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "data/testing/image_files.h"
#include "easyscale/common/sha256.h"
#include "easyscale/common/subprocess.h"

namespace easyscale::data {
namespace {

using testing::EncodeJpeg;
using testing::EncodePng;

std::vector<uint8_t> Pattern(int height, int width, int channels) {
  std::vector<uint8_t> v(static_cast<size_t>(height) * width * channels);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 37 + i / 7) % 256);
  return v;
}

TEST(DecodeImage, PngChannelsConvertAsDocumented) {
  const std::vector<uint8_t> rgb = Pattern(5, 7, 3);
  auto same = DecodeImage(EncodePng(rgb, 5, 7, 3), 3, "rgb.png");
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->pixels, rgb);
  EXPECT_EQ(same->height, 5);
  EXPECT_EQ(same->width, 7);
  auto grey = DecodeImage(EncodePng(rgb, 5, 7, 3), 1, "rgb.png");
  ASSERT_TRUE(grey.ok()) << grey.status();
  ASSERT_EQ(grey->pixels.size(), 35u);
  for (size_t i = 0; i < 35; ++i) {
    const int y = (77 * rgb[3 * i] + 150 * rgb[3 * i + 1] + 29 * rgb[3 * i + 2] + 128) >> 8;
    ASSERT_EQ(grey->pixels[i], y) << i;
  }
  const std::vector<uint8_t> g = Pattern(4, 4, 1);
  auto expanded = DecodeImage(EncodePng(g, 4, 4, 1), 3, "g.png");
  ASSERT_TRUE(expanded.ok());
  for (size_t i = 0; i < 16; ++i) {
    for (int c = 0; c < 3; ++c) ASSERT_EQ(expanded->pixels[3 * i + c], g[i]);
  }
  // Alpha is dropped, never composited.
  const std::vector<uint8_t> rgba = Pattern(3, 3, 4);
  auto dropped = DecodeImage(EncodePng(rgba, 3, 3, 4), 3, "a.png");
  ASSERT_TRUE(dropped.ok());
  for (size_t i = 0; i < 9; ++i) {
    for (int c = 0; c < 3; ++c) ASSERT_EQ(dropped->pixels[3 * i + c], rgba[4 * i + c]);
  }
  const std::vector<uint8_t> ga = Pattern(3, 3, 2);
  auto grey_alpha = DecodeImage(EncodePng(ga, 3, 3, 2), 1, "ga.png");
  ASSERT_TRUE(grey_alpha.ok());
  for (size_t i = 0; i < 9; ++i) ASSERT_EQ(grey_alpha->pixels[i], ga[2 * i]);
}

TEST(DecodeImage, JpegDecodesCloseToTheSourceAndTheSameEveryTime) {
  std::vector<uint8_t> smooth(16 * 16 * 3);
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x) {
      for (int c = 0; c < 3; ++c)
        smooth[(y * 16 + x) * 3 + c] = static_cast<uint8_t>(8 * y + 4 * x + 20 * c);
    }
  }
  const std::string jpeg = EncodeJpeg(smooth, 16, 16, 3, 100);
  auto a = DecodeImage(jpeg, 3, "s.jpg");
  auto b = DecodeImage(jpeg, 3, "s.jpg");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->pixels, b->pixels);
  for (size_t i = 0; i < smooth.size(); ++i) ASSERT_NEAR(a->pixels[i], smooth[i], 6) << i;
  auto grey = DecodeImage(jpeg, 1, "s.jpg");
  ASSERT_TRUE(grey.ok());
  EXPECT_EQ(grey->channels, 1);
  EXPECT_EQ(grey->pixels.size(), 256u);
}

// SHA-256 of JPEGs decoded to RGB and grey: colour ones of odd sizes with
// 4:2:0 and 4:4:4 chroma (quality 75 and 95: upsampled and not), and a grey one.
std::string JpegDecodeDigest() {
  Sha256 h;
  for (auto [height, width, channels, quality] :
       {std::tuple{37, 53, 3, 75}, std::tuple{64, 48, 3, 95}, std::tuple{29, 31, 1, 90}}) {
    const std::string jpeg =
        EncodeJpeg(Pattern(height, width, channels), height, width, channels, quality);
    for (int out : {1, 3}) {
      auto image = DecodeImage(jpeg, out, "p.jpg");
      EXPECT_TRUE(image.ok()) << image.status();
      if (image.ok()) h.Update(image->pixels.data(), image->pixels.size());
    }
  }
  return h.HexDigest();
}

// The documented reason for JDCT_ISLOW: libjpeg-turbo's SIMD and C paths of
// it (with upsampling and colour conversion) give the same bits. This
// process decodes with SIMD; the same test in a child with
// JSIMD_FORCENONE=1 (libjpeg-turbo's switch) decodes with C only.
TEST(DecodeImage, JpegSimdAndCPathsGiveTheSameBits) {
  if (std::getenv("EASYSCALE_PRINT_JPEG_DIGEST") != nullptr) {
    std::printf("jpeg digest: %s\n", JpegDecodeDigest().c_str());
    return;
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  StatusOr<CommandResult> c_only =
      RunCommand({.argv = {self, "--gtest_filter=DecodeImage.JpegSimdAndCPathsGiveTheSameBits"},
                  .env = {{"JSIMD_FORCENONE", "1"}, {"EASYSCALE_PRINT_JPEG_DIGEST", "1"}},
                  .stdoutTo = Output::Pipe()},
                 std::chrono::seconds(60));
  ASSERT_TRUE(c_only.ok()) << c_only.status();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(c_only->out, m, std::regex("jpeg digest: ([0-9a-f]{64})")))
      << c_only->out;
  EXPECT_EQ(m[1], JpegDecodeDigest());
}

TEST(DecodeImage, BadFilesAreOneErrorNamingThem) {
  const std::string jpeg = EncodeJpeg(Pattern(32, 32, 3), 32, 32, 3);
  const std::string png = EncodePng(Pattern(32, 32, 3), 32, 32, 3);
  std::string garbled = jpeg;
  for (size_t i = garbled.size() / 2; i < garbled.size() - 2; ++i) garbled[i] = '\xFF';
  std::string bad_crc = png;
  bad_crc[40] ^= 0x55;  // inside IHDR or IDAT: the chunk's CRC no longer matches
  const std::pair<std::string, std::string> cases[] = {
      {jpeg.substr(0, jpeg.size() / 2), "cut.jpg: corrupt JPEG: "},
      {jpeg.substr(0, 20), "cut.jpg: corrupt JPEG: "},
      {garbled, "cut.jpg: corrupt JPEG: "},
      {png.substr(0, png.size() / 2), "cut.jpg: corrupt PNG: "},
      {bad_crc, "cut.jpg: corrupt PNG: "},
      {"GIF89a....", "cut.jpg: neither a JPEG nor a PNG file (bad signature)"},
      {"", "cut.jpg: neither a JPEG nor a PNG file (bad signature)"},
  };
  for (const auto& [bytes, want] : cases) {
    auto r = DecodeImage(bytes, 3, "cut.jpg");
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_EQ(std::string(r.status().message()).rfind(want, 0), 0u) << r.status();
  }
  EXPECT_EQ(DecodeImage(png, 2, "x.png").status().message(),
            "x.png: the model takes 2 channels; images decode to 1 (grey) or 3 (RGB)");
}

}  // namespace
}  // namespace easyscale::data
