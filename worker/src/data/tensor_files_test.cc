#include "data/tensor_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "data/testing/image_files.h"
#include "easyscale/common/file_io.h"
#include "easyscale/worker/philox.h"

namespace easyscale::data {
namespace {

namespace fs = std::filesystem;
using testing::Bytes;
using testing::EncodeNpy;
using testing::EncodeSafetensors;
using testing::RawTensorSpec;

class TensorFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("es-tensors-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomic(path, bytes).ok());
    return path;
  }
  StatusOr<Dataset> Load(const std::string& path) { return LoadUserData(path, {}); }
  std::string dir_;
};

const std::vector<int64_t> kLabels = {2, 0, 1, 2};

TEST_F(TensorFilesTest, SafetensorsOfEachInputTypeLoad) {
  const std::vector<float> rows = {0.5f, -1, 2, 3, 4, 5, 6, 7.25f};
  auto floats =
      Load(Write("rows.safetensors", EncodeSafetensors({{"labels", "I64", {4}, Bytes(kLabels)},
                                                        {"inputs", "F32", {4, 2}, Bytes(rows)}})));
  ASSERT_TRUE(floats.ok()) << floats.status();
  EXPECT_EQ(floats->type, SampleType::kFloat32);
  EXPECT_EQ(floats->shape, std::vector<int>{2});
  EXPECT_EQ(floats->floats, rows);
  EXPECT_EQ(floats->labels, (std::vector<int32_t>{2, 0, 1, 2}));
  EXPECT_EQ(floats->classes, 3);
  Tensor x;
  std::vector<int32_t> labels;
  PhiloxStream aug(DeriveKey(1, 1), 0);
  MakeBatch(*floats, {3, 1}, &aug, &x, &labels);  // rows are never augmented
  EXPECT_EQ(x.data, (std::vector<float>{6, 7.25f, 2, 3}));
  EXPECT_EQ(labels, (std::vector<int32_t>{2, 0}));

  const std::vector<uint8_t> pixels(4 * 3 * 2 * 2, 51);
  auto images = Load(
      Write("img.safetensors", EncodeSafetensors({{"inputs", "U8", {4, 3, 2, 2}, Bytes(pixels)},
                                                  {"labels", "I64", {4}, Bytes(kLabels)}},
                                                 R"({"classes": "10"})")));
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->type, SampleType::kPixels);
  EXPECT_EQ(images->shape, (std::vector<int>{3, 2, 2}));
  EXPECT_EQ(images->classes, 10);
  ASSERT_TRUE(SetNormalization({0.1, 0.2, 0.3}, {0.5}, &*images).ok());
  MakeBatch(*images, {0}, nullptr, &x, &labels);
  for (int c = 0; c < 3; ++c) {
    const float want = (51.0f * (1.0f / 255.0f) - static_cast<float>(0.1 * (c + 1))) / 0.5f;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(x.data[c * 4 + i], want);
  }

  const std::vector<int64_t> ids = {1, 2, 3, 4, 5, 6, 7, 8};
  auto tokens =
      Load(Write("tok.safetensors", EncodeSafetensors({{"inputs", "I64", {4, 2}, Bytes(ids)},
                                                       {"labels", "I64", {4}, Bytes(kLabels)}})));
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->type, SampleType::kTokenIds);
  EXPECT_EQ(tokens->token_ids, ids);
  EXPECT_EQ(tokens->sha256.size(), 64u);
}

TEST_F(TensorFilesTest, NpyFoldersLoad) {
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6, 7, 8};
  fs::create_directories(dir_ + "/npy");
  Write("npy/inputs.npy", EncodeNpy("<f4", {4, 2}, Bytes(rows)));
  Write("npy/labels.npy", EncodeNpy("<i8", {4}, Bytes(kLabels)));
  auto d = Load(dir_ + "/npy");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->floats, rows);
  EXPECT_EQ(d->labels, (std::vector<int32_t>{2, 0, 1, 2}));
  // Version 2 headers (a u32 length) read the same.
  std::string v2 = EncodeNpy("|u1", {4, 1, 1, 2}, std::string(8, '\x07'));
  const uint16_t len = static_cast<uint8_t>(v2[8]) | static_cast<uint16_t>(v2[9]) << 8;
  v2 = std::string("\x93NUMPY\x02\x00", 8) + std::string(reinterpret_cast<const char*>(&len), 2) +
       std::string(2, '\0') + v2.substr(10);
  Write("npy/inputs.npy", v2);
  auto pixels = Load(dir_ + "/npy");
  ASSERT_TRUE(pixels.ok()) << pixels.status();
  EXPECT_EQ(pixels->type, SampleType::kPixels);
  EXPECT_EQ(pixels->shape, (std::vector<int>{1, 1, 2}));
  EXPECT_NE(pixels->sha256, d->sha256);
}

TEST_F(TensorFilesTest, BadTensorFilesAreOneErrorNamingTheFile) {
  const std::string rows = Bytes(std::vector<float>(8, 1.0f));
  const std::string labels = Bytes(kLabels);
  const std::string good =
      EncodeSafetensors({{"inputs", "F32", {4, 2}, rows}, {"labels", "I64", {4}, labels}});
  struct Case {
    std::string bytes, want;
  };
  const std::string f = dir_ + "/bad.safetensors";
  const Case cases[] = {
      {good.substr(0, 5), f + ": truncated safetensors header (file of 5 bytes)"},
      {good.substr(0, 30), f + ": truncated safetensors header (file of 30 bytes, header of "},
      {EncodeSafetensors(
           {{"inputs", "F32", {4, 2}, rows}, {"labels", "I64", {3}, labels.substr(0, 24)}}),
       f + ": tensor labels: shape [3] does not match the 4 inputs"},
      {EncodeSafetensors({{"inputs", "F32", {4, 2}, rows},
                          {"labels", "I64", {4}, Bytes(std::vector<int64_t>{0, 1, -1, 0})}}),
       f + ": tensor labels: label -1 of sample 2 is outside [0, 2^31)"},
      {EncodeSafetensors({{"inputs", "F32", {4, 2}, rows}, {"labels", "I64", {4}, labels}},
                         R"({"classes": "2"})"),
       f + ": tensor labels: label 2 of sample 0 is outside [0, 2)"},
      {EncodeSafetensors(
           {{"inputs", "F16", {4, 2}, rows.substr(0, 16)}, {"labels", "I64", {4}, labels}}),
       f + ": tensor inputs: dtype F16 is not supported (F32, U8, I64 and I32 are)"},
      {EncodeSafetensors(
           {{"inputs", "F32", {4, 2}, rows}, {"labels", "F32", {4}, rows.substr(0, 16)}}),
       f + ": tensor labels: float32 labels; want class indices (int64)"},
      {EncodeSafetensors({{"inputs", "F32", {8}, rows}, {"labels", "I64", {4}, labels}}),
       f + ": tensor inputs: shape [8]: want [N, F] rows or token ids, or [N, C, H, W] images"},
      {EncodeSafetensors({{"inputs", "F32", {4, 3}, rows}, {"labels", "I64", {4}, labels}}),
       f + ": tensor inputs: shape [4, 3] takes 48 bytes, the file holds 32"},
      {EncodeSafetensors({{"inputs", "F32", {4, 2}, rows}}),
       f + ": tensor labels: missing (the file must hold inputs and labels)"},
      {EncodeSafetensors({{"inputs", "I64", {4, 1}, Bytes(std::vector<int64_t>{1, 2, 1 << 24, 0})},
                          {"labels", "I64", {4}, labels}}),
       f + ": tensor inputs: token id 16777216 (value 2) outside [0, 2^24)"},
      {EncodeSafetensors(
           {{"inputs", "F32", {4, 2}, Bytes(std::vector<float>{1, 2, NAN, 0, 0, 0, 0, 0})},
            {"labels", "I64", {4}, labels}}),
       f + ": tensor inputs: value 2 is nan, not finite"},
  };
  for (const Case& c : cases) {
    Write("bad.safetensors", c.bytes);
    auto d = Load(f);
    ASSERT_FALSE(d.ok()) << c.want;
    EXPECT_EQ(std::string(d.status().message()).rfind(c.want, 0), 0u) << d.status();
  }
  fs::create_directories(dir_ + "/npy");
  const std::string in = dir_ + "/npy/inputs.npy";
  Write("npy/labels.npy", EncodeNpy("<i8", {4}, labels));
  const Case npy[] = {
      {EncodeNpy("<f8", {4, 2}, rows + rows),
       in + ": dtype '<f8' is not supported ('<f4' float32, '|u1' uint8, '<i8' int64 and '<i4' "
            "int32 are)"},
      {EncodeNpy("<f4", {4, 2}, rows).substr(0, 40), in + ": truncated .npy header"},
      {"PK\x03\x04 a zip file", in + ": not a .npy file (bad magic)"},
      {std::string("\x93NUMPY\x04\x00", 8) + "xxxx",
       in + ": .npy format version 4 is not supported"},
  };
  for (const Case& c : npy) {
    Write("npy/inputs.npy", c.bytes);
    auto d = Load(dir_ + "/npy");
    ASSERT_FALSE(d.ok()) << c.want;
    EXPECT_EQ(std::string(d.status().message()).rfind(c.want, 0), 0u) << d.status();
  }
  std::string fortran = EncodeNpy("<f4", {4, 2}, rows);
  fortran.replace(fortran.find("False"), 5, "True ");
  Write("npy/inputs.npy", fortran);
  EXPECT_EQ(Load(dir_ + "/npy").status().message(), in + ": Fortran order; want C order");
}

TEST_F(TensorFilesTest, FifosDevicesAndUnknownFilesAreRefusedBeforeReading) {
  const std::string fifo = dir_ + "/data.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(Load(fifo).status().message(),
            "--data " + fifo + ": is a FIFO, not a regular file or a folder");
  EXPECT_EQ(Load("/dev/zero").status().message(),
            "--data /dev/zero: is a device, not a regular file or a folder");
  // A sparse file over the bound is refused before it is read.
  const std::string huge = Write("huge.safetensors", "");
  ASSERT_EQ(::truncate(huge.c_str(), static_cast<off_t>(kMaxTensorFileBytes + 1)), 0);
  EXPECT_NE(std::string(Load(huge).status().message()).find("huge.safetensors: larger than the"),
            std::string::npos)
      << Load(huge).status();
  const std::string csv = Write("data.csv", "1,2,3\n");
  EXPECT_NE(std::string(Load(csv).status().message()).find(": not a folder"), std::string::npos);
  EXPECT_TRUE(absl::IsNotFound(Load(dir_ + "/missing").status()));
}

TEST_F(TensorFilesTest, NormalizationFitsThePixelsOnly) {
  const std::vector<uint8_t> pixels(4 * 3 * 2 * 2, 51);
  auto images = Load(
      Write("img.safetensors", EncodeSafetensors({{"inputs", "U8", {4, 3, 2, 2}, Bytes(pixels)},
                                                  {"labels", "I64", {4}, Bytes(kLabels)}})));
  ASSERT_TRUE(images.ok());
  EXPECT_EQ(SetNormalization({0.5, 0.5}, {1}, &*images).message(),
            "--normalize-mean: 2 values; want 1 or one per channel of the 3-channel samples");
  auto rows = Load(Write("rows.safetensors",
                         EncodeSafetensors({{"inputs", "F32", {4, 1}, Bytes(std::vector<float>(4))},
                                            {"labels", "I64", {4}, Bytes(kLabels)}})));
  ASSERT_TRUE(rows.ok());
  EXPECT_NE(SetNormalization({0.5}, {1}, &*rows).message().find("only uint8 pixels are normalised"),
            std::string::npos);
}

}  // namespace
}  // namespace easyscale::data
