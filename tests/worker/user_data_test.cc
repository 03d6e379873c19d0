// Users' data: an image folder made from the MNIST digits (PNG and JPEG
// files) and a safetensors file of token sequences train exported models
// with `easyscale-worker local --data` to one digest whatever the schedule of
// worker processes (N = 4 ESTs); a resume with other data is refused; bad
// data is one clear line naming the file.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/testing/image_files.h"
#include "easyscale/common/file_io.h"
#include "easyscale/worker/dataset.h"
#include "worker_cli.h"

namespace {

namespace fs = std::filesystem;
using namespace easyscale::clitest;
namespace testing_files = easyscale::data::testing;

constexpr size_t kImages = 2000;

// The first 2000 digits as <digit>/<index>.png (even indices) or .jpg (odd).
std::string DigitFolder() {
  static const std::string dir = [] {
    const fs::path root = WorkDir() / "digits";
    fs::remove_all(root);
    auto digits = easyscale::LoadDataset(EASYSCALE_MNIST_DATA);
    EXPECT_TRUE(digits.ok()) << digits.status();
    if (!digits.ok()) return root.string();
    for (size_t i = 0; i < kImages; ++i) {
      const std::vector<uint8_t> pixels(digits->pixels.begin() + i * 784,
                                        digits->pixels.begin() + (i + 1) * 784);
      const fs::path dir = root / std::to_string(digits->labels[i]);
      fs::create_directories(dir);
      char name[32];
      std::snprintf(name, sizeof name, "%05zu.%s", i, i % 2 ? "jpg" : "png");
      const std::string bytes = i % 2 ? testing_files::EncodeJpeg(pixels, 28, 28, 1)
                                      : testing_files::EncodePng(pixels, 28, 28, 1);
      EXPECT_TRUE(easyscale::WriteFileAtomic((dir / name).string(), bytes).ok());
    }
    return root.string();
  }();
  return dir;
}

// 2000 sequences of the in-memory token task, as a safetensors file.
std::string TokenFile(const std::string& name, uint64_t seed) {
  const easyscale::Dataset tokens = easyscale::MakeTokenDataset(kImages, 32, 128, 10, seed);
  std::vector<int64_t> labels(tokens.labels.begin(), tokens.labels.end());
  const std::string path = (WorkDir() / name).string();
  EXPECT_TRUE(
      easyscale::WriteFileAtomic(
          path,
          testing_files::EncodeSafetensors(
              {{"inputs", "I64", {int64_t{kImages}, 32}, testing_files::Bytes(tokens.token_ids)},
               {"labels", "I64", {int64_t{kImages}}, testing_files::Bytes(labels)}}))
          .ok());
  return path;
}

std::string Digest(const std::string& model, const std::string& data, const std::string& extra,
                   const std::string& schedule) {
  Outcome r = Worker("local --ests 4 --steps 30 --batch-per-est 8 --checkpoint-every 0 --data " +
                     data + " --model-file " + model + " " + extra + " --schedule " + schedule);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.digest.size(), 64u) << r.output;
  EXPECT_GT(r.accuracy, 0.3) << r.output;  // it learns from the data it was given
  return r.digest;
}

TEST(UserData, ImageFolderTrainsToOneDigestForEverySchedule) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: run scripts/install-deps.sh";
  const std::string model = Exported(Example{"cnn", "--model cnn", "mnist"});
  const std::string flags = "--normalize-mean 0.1307 --normalize-std 0.3081";
  const std::string ref = Digest(model, DigitFolder(), flags, "0:4,10:2,25:3");
  ASSERT_EQ(ref.size(), 64u);
  EXPECT_EQ(Digest(model, DigitFolder(), flags, "0:4"), ref);
  EXPECT_EQ(Digest(model, DigitFolder(), flags, "0:1"), ref);
  EXPECT_NE(Digest(model, DigitFolder(), "", "0:4"), ref) << "normalisation must change the run";
}

TEST(UserData, SafetensorsTokensTrainToOneDigestForEverySchedule) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: run scripts/install-deps.sh";
  const std::string model =
      Exported(Example{"encoder", "--model encoder --width 32 --seq-len 32 --vocab 128", "tokens"});
  const std::string data = TokenFile("tokens.safetensors", 11);
  const std::string ref = Digest(model, data, "", "0:4,10:2,25:3");
  ASSERT_EQ(ref.size(), 64u);
  EXPECT_EQ(Digest(model, data, "", "0:4"), ref);
  EXPECT_EQ(Digest(model, data, "", "0:1"), ref);
}

// The data's checksum is part of the job's identity; its path is not.
TEST(UserData, ResumeWithOtherDataIsRefused) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: run scripts/install-deps.sh";
  const std::string model =
      Exported(Example{"encoder", "--model encoder --width 32 --seq-len 32 --vocab 128", "tokens"});
  const std::string ckpt = (WorkDir() / "resume-ckpt").string();
  fs::remove_all(ckpt);
  const std::string job =
      "local --ests 2 --steps 6 --batch-per-est 4 --schedule 0:1 "
      "--checkpoint-every 3 --model-file " +
      model + " --checkpoint-dir " + ckpt + " --data ";
  Outcome first = Worker(job + TokenFile("first.safetensors", 11));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  Outcome moved = Worker(job + TokenFile("moved.safetensors", 11));  // same bytes elsewhere
  EXPECT_EQ(moved.exit_code, 0) << moved.output;
  EXPECT_EQ(moved.digest, first.digest);
  Outcome other = Worker(job + TokenFile("other.safetensors", 12));
  EXPECT_EQ(other.exit_code, 3) << other.output;
  EXPECT_NE(other.output.find("dataSha256: the checkpoint's is"), std::string::npos)
      << other.output;
}

TEST(UserData, BadDataIsOneClearLineNamingTheFile) {
  const fs::path bad = WorkDir() / "bad-images";
  fs::remove_all(bad);
  fs::create_directories(bad / "a");
  fs::create_directories(bad / "b");
  const std::vector<uint8_t> grey(28 * 28, 128);
  ASSERT_TRUE(easyscale::WriteFileAtomic((bad / "a/1.png").string(),
                                         testing_files::EncodePng(grey, 28, 28, 1))
                  .ok());
  const std::string jpeg = testing_files::EncodeJpeg(grey, 28, 28, 1);
  ASSERT_TRUE(
      easyscale::WriteFileAtomic((bad / "b/2.jpg").string(), jpeg.substr(0, jpeg.size() / 2)).ok());
  Outcome r = Worker("local --ests 2 --steps 2 --schedule 0:1 --data " + bad.string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(
      r.output.find("easyscale-worker: error: " + (bad / "b/2.jpg").string() + ": corrupt JPEG: "),
      std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;

  r = Worker("local --ests 2 --steps 2 --schedule 0:1 --dataset tokens --data " + bad.string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("--dataset: must stay at its default (mnist) when --data names the "
                          "data, got \"tokens\""),
            std::string::npos)
      << r.output;
  r = Worker("local --ests 2 --steps 2 --schedule 0:1 --data /dev/null");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("--data /dev/null: is a device, not a regular file or a folder"),
            std::string::npos)
      << r.output;
}

}  // namespace
