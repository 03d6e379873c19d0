// Users' own models: every example model exported from PyTorch trains with
// `easyscale-worker local --model-file` to one digest whatever the schedule of
// worker processes (N = 4 ESTs), a different one for a different seed; and a
// bad model file is refused with one clear line naming what is wrong.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "worker_cli.h"

namespace {

namespace fs = std::filesystem;
using namespace easyscale::clitest;

class ModelFile : public ::testing::TestWithParam<Example> {};

std::string Digest(const Example& ex, const std::string& schedule, int seed = 1) {
  Outcome r =
      Worker("local --ests 4 --steps 30 --batch-per-est 8 --checkpoint-every 0 --dataset " +
             ex.dataset + " --digits-file " + EASYSCALE_MNIST_DATA + " --seed " +
             std::to_string(seed) + " --model-file " + Exported(ex) + " --schedule " + schedule);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.digest.size(), 64u) << r.output;
  return r.digest;
}

TEST_P(ModelFile, OneDigestForEverySchedule) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: run scripts/install-deps.sh";
  const Example& ex = GetParam();
  const std::string ref = Digest(ex, "0:4,10:2,25:3");
  ASSERT_EQ(ref.size(), 64u);
  EXPECT_EQ(Digest(ex, "0:4"), ref);
  EXPECT_EQ(Digest(ex, "0:1"), ref);
  EXPECT_EQ(Digest(ex, "0:3"), ref);  // 2, 1, 1 ESTs per worker
  EXPECT_NE(Digest(ex, "0:4", 2), ref) << "the seed must change the run";
}

INSTANTIATE_TEST_SUITE_P(Examples, ModelFile, ::testing::ValuesIn(NarrowExamples()),
                         [](const auto& info) { return info.param.name; });

// Each bad file (tests/worker/make_bad_models.py) and the words its one-line
// error must hold.
struct BadModel {
  std::string file;
  std::string says;
};

class BadModelFile : public ::testing::TestWithParam<BadModel> {};

TEST_P(BadModelFile, RefusedWithOneClearLine) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: run scripts/install-deps.sh";
  static const bool made = [] {
    Outcome r = Command(
        {kPython, kSource + "/tests/worker/make_bad_models.py", (WorkDir() / "bad").string()});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return true;
  }();
  (void)made;
  const std::string path = (WorkDir() / "bad" / GetParam().file).string();
  Outcome r =
      Worker("local --ests 2 --steps 2 --batch-per-est 4 --digits-file " +
             std::string(EASYSCALE_MNIST_DATA) + " --model-file " + path + " --schedule 0:1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(GetParam().says), std::string::npos)
      << "want \"" << GetParam().says << "\" in:\n"
      << r.output;
  EXPECT_NE(r.output.find(path), std::string::npos) << "the error names the file:\n" << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Files, BadModelFile,
    ::testing::Values(BadModel{"truncated.onnx", "not an ONNX model"},
                      BadModel{"not_onnx.onnx", "not an ONNX model"},
                      BadModel{"unsupported_op.onnx", "node odd_one: operator Hardmax (opset 17)"},
                      BadModel{"missing_initializer.onnx", "fc.bias"},
                      BadModel{"integer_parameters.onnx", "integer initializers"},
                      BadModel{"wrong_input.onnx", "input"},
                      BadModel{"unresolvable_shape.onnx", "dynamic_reshape"}),
    [](const auto& info) { return info.param.file.substr(0, info.param.file.find('.')); });

// Data the model cannot take: token ids beyond its vocabulary, images for a
// token model. One clear line before any training, naming the file.
TEST(ModelFileData, RefusedBeforeTraining) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: run scripts/install-deps.sh";
  const std::string small = Exported(
      Example{"encoder_vocab64", "--model encoder --width 32 --seq-len 32 --vocab 64", "tokens"});
  Outcome r = Worker("local --ests 2 --steps 2 --batch-per-est 4 --dataset tokens --model-file " +
                     small + " --schedule 0:1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("has 64 rows"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(small), std::string::npos) << r.output;
  r = Worker("local --ests 2 --steps 2 --batch-per-est 4 --dataset mnist --digits-file " +
             std::string(EASYSCALE_MNIST_DATA) + " --model-file " + small + " --schedule 0:1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  // The digits are 784 pixels a sample, the model takes 32 ids.
  EXPECT_NE(r.output.find("the data gives [4, 784]"), std::string::npos) << r.output;
}

TEST(ModelFileFlags, GraphRuntimeIsCpuOnlySoFar) {
  Outcome r = Worker("local --ests 2 --steps 2 --backend cuda --model-file x.onnx --digits-file " +
                     std::string(EASYSCALE_MNIST_DATA));
  EXPECT_NE(r.exit_code, 0) << r.output;
}

}  // namespace
