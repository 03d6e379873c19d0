// The trained model out (`--output`): model.safetensors loads into the
// original PyTorch module with load_state_dict(strict=True) and gives the
// worker's logits within a stated tolerance; model.onnx passes ONNX's checker
// and, loaded by `easyscale-worker predict`, gives the final evaluation's
// logits bit for bit; the files are the same bits for every schedule; a bad
// output folder fails before training; --output-every-checkpoint writes one
// folder per checkpoint.
#include "easyscale/worker/model_output.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/str_split.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/sha256.h"
#include "easyscale/worker/est_worker.h"
#include "easyscale/worker/predict.h"
#include "easyscale/worker/worker_process.h"
#include "worker_cli.h"

namespace easyscale::clitest {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxFileBytes = 64 << 20;
const std::string kData = EASYSCALE_MNIST_DATA;

// PyTorch's eval-mode logits against the worker's: both compute in float32,
// with other summation orders (PyTorch's GEMM and convolution kernels block
// and vectorise their sums differently from the worker's fixed orders), so
// they agree to a few float32 roundings per layer, not bit for bit. Allowed:
// 1e-5 of the largest logit's magnitude (at least 1); measured at most
// 5.1e-7 of it on these four models (README, "The trained model").
constexpr double kTorchTolerance = 1e-5;

std::string Bytes(const fs::path& p) {
  StatusOr<std::string> bytes = ReadFile(p.string(), kMaxFileBytes);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

std::set<std::string> Entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

fs::path FreshDir(const std::string& name) {
  const fs::path dir = WorkDir() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Trains an example (N = 4, 30 steps) with the model `model_flags` and its output in `out`.
Outcome Train(const Example& ex, const std::string& model_flags, const fs::path& out,
              const std::string& schedule, const std::string& extra = "") {
  return Worker("local --ests 4 --steps 30 --batch-per-est 8 --checkpoint-every 0 --dataset " +
                ex.dataset + " --digits-file " + kData + " " + model_flags + " --output " +
                out.string() + " --schedule " + schedule + " " + extra);
}

// The "model: <file> sha256 <hex>" line `local` prints for `file`.
std::string PrintedDigest(const std::string& output, const fs::path& file) {
  std::smatch m;
  const std::regex line("model: " + file.string() + " sha256 ([0-9a-f]{64})\n");
  return std::regex_search(output, m, line) ? m[1].str() : "";
}

// Runs check_model_output.py: PyTorch loads the safetensors file into the
// example's module (strict) and compares its logits on `inputs`.
Outcome CheckInPyTorch(const Example& ex, const fs::path& out, const fs::path& inputs,
                       const std::string& extra_flags) {
  std::vector<std::string> argv = {kPython, kSource + "/tests/worker/check_model_output.py"};
  for (absl::string_view a : absl::StrSplit(ex.knobs, ' ', absl::SkipEmpty())) argv.emplace_back(a);
  for (const std::string& a : {std::string("--safetensors"), (out / kSafetensorsFileName).string(),
                               std::string("--inputs"), inputs.string()}) {
    argv.push_back(a);
  }
  for (absl::string_view a : absl::StrSplit(extra_flags, ' ', absl::SkipEmpty())) {
    argv.emplace_back(a);
  }
  return Command(argv);
}

class ModelOutput : public ::testing::TestWithParam<Example> {
 protected:
  void SetUp() override {
    if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: run scripts/install-deps.sh";
  }
};

TEST_P(ModelOutput, PyTorchLoadsItAndPredictGivesTheJobsLogits) {
  const Example& ex = GetParam();
  const fs::path out = FreshDir(ex.name + "-out");
  Outcome job = Train(ex, "--model-file " + Exported(ex), out, "0:4,10:2,25:3");
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_EQ(Entries(out), (std::set<std::string>{kOnnxFileName, kSafetensorsFileName}))
      << "the two files and nothing else (no temporary file left)";
  for (const char* file : {kOnnxFileName, kSafetensorsFileName}) {
    const std::string bytes = Bytes(out / file);
    EXPECT_EQ(PrintedDigest(job.output, out / file), Sha256Hex(bytes.data(), bytes.size()))
        << job.output;
  }
  // The written ONNX in the worker: the held-out accuracy the job printed.
  const fs::path logits = out.parent_path() / (ex.name + "-logits.npy");
  const fs::path inputs = out.parent_path() / (ex.name + "-inputs.npy");
  Outcome predict = Worker("predict --model-file " + (out / kOnnxFileName).string() +
                           " --batch 8 --dataset " + ex.dataset + " --digits-file " + kData +
                           " --logits " + logits.string() + " --inputs " + inputs.string());
  ASSERT_EQ(predict.exit_code, 0) << predict.output;
  EXPECT_EQ(predict.accuracy, job.accuracy) << predict.output << job.output;
  // PyTorch: the original module, strict load, eval(); ONNX's own checker.
  Outcome torch = CheckInPyTorch(ex, out, inputs,
                                 "--logits " + logits.string() + " --tolerance " +
                                     std::to_string(kTorchTolerance) + " --onnx " +
                                     (out / kOnnxFileName).string());
  EXPECT_EQ(torch.exit_code, 0) << torch.output;
  EXPECT_NE(torch.output.find("\"onnx_checker\": \"passed\""), std::string::npos) << torch.output;
  std::printf("%s: %s", ex.name.c_str(), torch.output.c_str());  // the measured difference
}

TEST_P(ModelOutput, SameFilesForEverySchedule) {
  const Example& ex = GetParam();
  const std::string model = "--model-file " + Exported(ex);
  const fs::path ref = FreshDir(ex.name + "-ref");
  Outcome r = Train(ex, model, ref, "0:4,10:2,25:3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string schedule : {"0:4", "0:1"}) {
    const fs::path out = FreshDir(ex.name + "-" + schedule.substr(2));
    Outcome again = Train(ex, model, out, schedule);
    ASSERT_EQ(again.exit_code, 0) << again.output;
    EXPECT_EQ(again.digest, r.digest);
    for (const char* file : {kOnnxFileName, kSafetensorsFileName}) {
      EXPECT_TRUE(Bytes(out / file) == Bytes(ref / file)) << file << " differs for " << schedule;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, ModelOutput, ::testing::ValuesIn(NarrowExamples()),
                         [](const auto& info) { return info.param.name; });

// The written ONNX, loaded again, gives the logits of the final evaluation of
// the trained state in memory, bit for bit, and other logits than the file
// the job started from (its values were replaced).
TEST_P(ModelOutput, WrittenOnnxGivesTheInMemoryLogitsBitForBit) {
  const Example& ex = GetParam();
  TrainingArgs args;
  args.model = "file";
  args.modelFile = Exported(ex);
  args.dataset = ex.dataset;
  args.steps = 6;
  args.batchPerEst = 8;
  args.checkpointEvery = 0;
  StatusOr<Dataset> data = LoadTrainingData(args, kData);
  ASSERT_TRUE(data.ok()) << data.status();
  WorkerConfig config;
  config.args = args;
  config.total_ests = 2;
  config.ests = {0, 1};
  auto comm = MakeSingleProcessCollective();
  auto worker = EstWorker::Create(config, *data, *comm);
  ASSERT_TRUE(worker.ok()) << worker.status();
  (*worker)->Initialize();
  for (int i = 0; i < args.steps; ++i) ASSERT_TRUE((*worker)->Step(false).ok());
  StatusOr<FinalResult> final = EstWorker::Finalize(config, *data, (*worker)->Snapshot());
  ASSERT_TRUE(final.ok()) << final.status();
  StatusOr<TrainedModel> trained = (*worker)->Trained();
  ASSERT_TRUE(trained.ok()) << trained.status();
  const fs::path out = FreshDir(ex.name + "-in-memory");
  ASSERT_TRUE(WriteTrainedModel(*trained, out.string()).ok());

  auto predict = [&](const std::string& file) {
    TrainingArgs a = args;
    a.modelFile = file;
    auto model = LoadModel(a, data->shape, data->classes, a.batchPerEst);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return std::vector<float>();
    (*model)->InitParams(0);
    std::vector<Tensor> buffers = (*model)->InitialBuffers();
    return Predict(**model, buffers, *data, SplitTrainTest(data->count()).test, CpuKernelBackend())
        .logits;
  };
  const std::vector<float> written = predict((out / kOnnxFileName).string());
  ASSERT_EQ(written.size(), final->test_logits.size());
  EXPECT_EQ(std::memcmp(written.data(), final->test_logits.data(), written.size() * sizeof(float)),
            0);
  EXPECT_NE(predict(args.modelFile), written) << "the written file holds the trained values";
}

// A built-in model has no ONNX source: safetensors only, named as the same
// layers in a torch.nn.Sequential (models.py's Cnn is the built-in "cnn").
TEST(ModelOutputBuiltIn, CnnLoadsIntoTheSequentialModule) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: run scripts/install-deps.sh";
  const Example cnn = {"cnn-builtin", "--model cnn --width 8", "mnist"};
  const fs::path out = FreshDir("builtin-out");
  Outcome job = Train(cnn, "--model cnn", out, "0:2");
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_EQ(Entries(out), std::set<std::string>{kSafetensorsFileName});
  EXPECT_NE(job.output.find("no model.onnx for a built-in model"), std::string::npos) << job.output;
  // Held-out inputs as the worker feeds them (any digits model gives the same).
  const fs::path inputs = out.parent_path() / "builtin-inputs.npy";
  Outcome predict = Worker("predict --model-file " + Exported(NarrowExamples()[0]) +
                           " --digits-file " + kData + " --inputs " + inputs.string());
  ASSERT_EQ(predict.exit_code, 0) << predict.output;
  Outcome torch = CheckInPyTorch(cnn, out, inputs, "");
  EXPECT_EQ(torch.exit_code, 0) << torch.output;
}

// A folder the job cannot write into is an error before training, naming it.
TEST(ModelOutputFolder, BadFolderFailsBeforeTraining) {
  const fs::path file = WorkDir() / "a-file";
  ASSERT_TRUE(WriteFileAtomic(file.string(), "x").ok());
  const std::pair<fs::path, std::string> cases[] = {
      {WorkDir() / "no-such-folder", "No such file or directory"}, {file, "not a folder"}};
  for (const auto& [path, says] : cases) {
    Outcome r = Worker("local --ests 2 --steps 4 --batch-per-est 4 --model cnn --digits-file " +
                       kData + " --schedule 0:1 --output " + path.string());
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("output folder " + path.string() + ": " + says), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("\"event\":\"step\""), std::string::npos) << "trained first:\n"
                                                                      << r.output;
  }
  Outcome r = Worker(
      "local --ests 2 --steps 4 --model cnn --schedule 0:1 --output-every-checkpoint "
      "--digits-file " +
      kData);
  EXPECT_NE(r.output.find("--output-every-checkpoint: needs --output"), std::string::npos)
      << r.output;
}

// --output-every-checkpoint: the model of every checkpoint in its own folder;
// the last one is the job's final model.
TEST(ModelOutputEveryCheckpoint, WritesAFolderPerCheckpoint) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: run scripts/install-deps.sh";
  const Example& cnn = NarrowExamples()[0];
  const fs::path out = FreshDir("every-checkpoint");
  Outcome job =
      Worker("local --ests 2 --steps 30 --batch-per-est 8 --checkpoint-every 10 --digits-file " +
             kData + " --model-file " + Exported(cnn) + " --schedule 0:2,15:1 --output " +
             out.string() + " --output-every-checkpoint");
  ASSERT_EQ(job.exit_code, 0) << job.output;
  // Steps 10, 20, 30 and the hand-over at 15.
  EXPECT_EQ(Entries(out), (std::set<std::string>{kOnnxFileName, kSafetensorsFileName, "step-10",
                                                 "step-15", "step-20", "step-30"}));
  for (const char* step : {"step-10", "step-15", "step-20", "step-30"}) {
    EXPECT_EQ(Entries(out / step), (std::set<std::string>{kOnnxFileName, kSafetensorsFileName}));
  }
  for (const char* file : {kOnnxFileName, kSafetensorsFileName}) {
    EXPECT_TRUE(Bytes(out / "step-30" / file) == Bytes(out / file)) << file;
    EXPECT_FALSE(Bytes(out / "step-10" / file) == Bytes(out / file)) << file;
  }
}

}  // namespace
}  // namespace easyscale::clitest
