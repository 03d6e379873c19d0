#include "easyscale/worker/model_output.h"

#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "easyscale/common/file_io.h"
#include "testing/small_tmpfs.h"

namespace easyscale {
namespace {

namespace fs = std::filesystem;

class ModelOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("es-model-out-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

// A small model with one BatchNorm ("bn"), trained for `step` steps.
TrainedModel Small(int64_t step) {
  TrainedModel m;
  m.step = step;
  m.parameters = {{"fc.weight", {2, 3}, {1, 2, 3, 4, 5, 6}},
                  {"bn.weight", {3}, {1, 1, 1}},
                  {"bn.bias", {3}, {0, 0, 0}},
                  {"fc.bias", {2}, {0.5f, -0.5f}}};
  m.buffers = {{"bn.running_mean", {3}, {0.1f, 0.2f, 0.3f}},
               {"bn.running_var", {3}, {1.1f, 1.2f, 1.3f}}};
  return m;
}

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

TEST_F(ModelOutputTest, SafetensorsHoldsTheStateDictSortedAndAligned) {
  const StatusOr<OutputDigests> d = WriteTrainedModel(Small(7), dir_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->path, dir_);
  EXPECT_TRUE(d->onnxSha256.empty()) << "no ONNX source, no ONNX file";
  EXPECT_EQ(Entries(dir_), std::set<std::string>{kSafetensorsFileName});
  const std::string bytes = *ReadFile(dir_ + "/" + kSafetensorsFileName, 1 << 20);
  uint64_t size = 0;
  std::memcpy(&size, bytes.data(), sizeof(size));
  EXPECT_EQ((8 + size) % 8, 0u) << "the data starts 8-byte aligned";
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, size));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  // Every tensor, and num_batches_tracked (the steps, int64 scalar) for the BatchNorm.
  const std::vector<std::string> want = {"bn.bias",         "bn.num_batches_tracked",
                                         "bn.running_mean", "bn.running_var",
                                         "bn.weight",       "fc.bias",
                                         "fc.weight"};
  size_t offset = 0;
  for (const std::string& name : want) {  // ascending names, back to back
    ASSERT_TRUE(header.contains(name)) << name;
    EXPECT_EQ(header[name]["data_offsets"][0], offset) << name;
    offset = header[name]["data_offsets"][1];
  }
  EXPECT_EQ(8 + size + offset, bytes.size());
  EXPECT_EQ(header["bn.num_batches_tracked"]["dtype"], "I64");
  EXPECT_EQ(header["bn.num_batches_tracked"]["shape"], nlohmann::json::array());
  int64_t tracked = 0;
  std::memcpy(
      &tracked,
      bytes.data() + 8 + size + header["bn.num_batches_tracked"]["data_offsets"][0].get<size_t>(),
      sizeof(tracked));
  EXPECT_EQ(tracked, 7);
  EXPECT_EQ(header["fc.weight"]["shape"], nlohmann::json({2, 3}));
  float w = 0;
  std::memcpy(&w,
              bytes.data() + 8 + size + header["fc.weight"]["data_offsets"][0].get<size_t>() + 4,
              sizeof(w));
  EXPECT_EQ(w, 2.0f);
}

TEST_F(ModelOutputTest, SameModelSameBytes) {
  ASSERT_TRUE(WriteTrainedModel(Small(7), dir_ + "/a").ok());
  ASSERT_TRUE(WriteTrainedModel(Small(7), dir_ + "/b").ok());
  ASSERT_TRUE(WriteTrainedModel(Small(8), dir_ + "/c").ok());
  const auto read = [&](const std::string& sub) {
    return *ReadFile(dir_ + "/" + sub + "/" + kSafetensorsFileName, 1 << 20);
  };
  EXPECT_EQ(read("a"), read("b"));
  EXPECT_NE(read("a"), read("c"));
}

TEST_F(ModelOutputTest, TwoTensorsOfOneNameAreRefused) {
  TrainedModel m = Small(1);
  m.buffers.push_back({"bn.num_batches_tracked", {1}, {0}});
  const Status s = WriteTrainedModel(m, dir_).status();
  EXPECT_NE(s.message().find("two tensors named bn.num_batches_tracked"), std::string::npos) << s;
}

TEST_F(ModelOutputTest, CheckOutputFolderNamesWhatIsWrong) {
  EXPECT_TRUE(CheckOutputFolder(dir_).ok());
  EXPECT_EQ(Entries(dir_), std::set<std::string>{}) << "the probe file is gone";
  const Status missing = CheckOutputFolder(dir_ + "/missing");
  EXPECT_EQ(missing.message(),
            "output folder " + dir_ + "/missing: No such file or directory (create it first)");
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/file", "x").ok());
  EXPECT_EQ(CheckOutputFolder(dir_ + "/file").message(),
            "output folder " + dir_ + "/file: not a folder");
}

// Root passes every permission check: a read-only mount is what it cannot write.
TEST_F(ModelOutputTest, ReadOnlyFolderIsRefusedBeforeAnyWrite) {
  testing::SmallTmpfs tmpfs(64 << 10);
  if (!tmpfs.ok()) GTEST_SKIP() << tmpfs.why_not();
  ASSERT_EQ(::mount(nullptr, tmpfs.path().c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0)
      << std::strerror(errno);
  EXPECT_EQ(CheckOutputFolder(tmpfs.path()).message(),
            "output folder " + tmpfs.path() + ": cannot create files there: Read-only file system");
}

// A write that fails (a full disk) leaves the previous model whole and no
// partial file: each file is replaced by a rename, or not at all.
TEST_F(ModelOutputTest, FailedWriteLeavesThePreviousModelWhole) {
  testing::SmallTmpfs tmpfs(64 << 10);
  if (!tmpfs.ok()) GTEST_SKIP() << tmpfs.why_not();
  const std::string out = tmpfs.path() + "/model";
  ASSERT_TRUE(WriteTrainedModel(Small(7), out).ok());
  const std::string before = *ReadFile(out + "/" + kSafetensorsFileName, 1 << 20);
  tmpfs.Fill();
  TrainedModel bigger = Small(8);
  bigger.parameters[0].values.assign(16 << 10, 1.0f);
  bigger.parameters[0].shape = {16 << 10};
  const Status s = WriteTrainedModel(bigger, out).status();
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_EQ(*ReadFile(out + "/" + kSafetensorsFileName, 1 << 20), before);
  EXPECT_EQ(Entries(out), std::set<std::string>{kSafetensorsFileName});
}

}  // namespace
}  // namespace easyscale
