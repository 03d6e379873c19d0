// The graph runtime against PyTorch: for every example model, one training
// step (forward, the worker's cross-entropy, backward, the worker's SGD with
// momentum and weight decay) on the same weights and batch, with Dropout off,
// gives PyTorch's loss, logits, every parameter's gradient, the updated
// parameters and BatchNorm's running statistics within a stated tolerance.
//
// Tolerance, per tensor: max |ours - torch| <= 1e-3 * max |torch| + 1e-6.
// The two sides sum in different orders (PyTorch's oneDNN and BLAS kernels
// block and vectorise their reductions), so bits differ; a wrong gradient
// rule is off by far more than this.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/file_io.h"
#include "easyscale/common/subprocess.h"
#include "easyscale/worker/cpu_kernels.h"
#include "easyscale/worker/model.h"
#include "easyscale/worker/optimizer.h"
#include "easyscale/worker/philox.h"

namespace easyscale {
namespace {

namespace fs = std::filesystem;

constexpr char kPython[] = "/usr/bin/python3";
const std::string kModels = std::string(EASYSCALE_SOURCE_DIR) + "/deploy/examples/models";

struct Example {
  std::string name;
  std::vector<std::string> knobs;  // export.py's and torch_reference.py's model flags
  std::vector<int> input_chw;
};

// The narrow variants CI trains (deploy/examples/models/README.md).
std::vector<Example> Examples() {
  return {{"cnn", {"--model", "cnn"}, {1, 28, 28}},
          {"resnet18", {"--model", "resnet18", "--width", "8"}, {1, 28, 28}},
          {"mobilenetv2", {"--model", "mobilenetv2", "--width", "0.25"}, {1, 28, 28}},
          {"encoder",
           {"--model", "encoder", "--width", "32", "--seq-len", "32", "--vocab", "128"},
           {1, 1, 32}}};
}

void Run(std::vector<std::string> argv) {
  StatusOr<CommandResult> r =
      RunCommand({.argv = argv, .stdoutTo = Output::Pipe(), .stderrTo = Output::SameAsStdout()},
                 std::chrono::minutes(5));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exitCode, 0) << argv[1] << ":\n" << r->out;
}

std::vector<float> Floats(const nlohmann::json& j) { return j.get<std::vector<float>>(); }

void ExpectClose(const std::string& what, const std::vector<float>& ours,
                 const std::vector<float>& torch) {
  ASSERT_EQ(ours.size(), torch.size()) << what;
  float scale = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    scale = std::max(scale, std::abs(torch[i]));
    const float d = std::abs(ours[i] - torch[i]);
    if (!(d <= worst)) {  // NaN counts as the worst
      worst = d;
      at = i;
    }
  }
  EXPECT_LE(worst, 1e-3f * scale + 1e-6f)
      << what << ": element " << at << " is " << ours[at] << ", PyTorch " << torch[at]
      << " (max |torch| " << scale << ")";
}

class TorchReference : public ::testing::TestWithParam<Example> {};

TEST_P(TorchReference, OneStepMatchesPyTorch) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is missing: run scripts/install-deps.sh";
  const Example& ex = GetParam();
  const fs::path dir = fs::path(::testing::TempDir()) / ("torch_ref_" + ex.name);
  fs::create_directories(dir);
  const std::string onnx = (dir / "model.onnx").string();
  const std::string ref = (dir / "reference.json").string();
  constexpr int kBatch = 4;
  std::vector<std::string> exp = {kPython, kModels + "/export.py"};
  exp.insert(exp.end(), ex.knobs.begin(), ex.knobs.end());
  for (const char* a : {"--seed", "3", "--dropout", "0", "--out"}) exp.emplace_back(a);
  exp.push_back(onnx);
  ASSERT_NO_FATAL_FAILURE(Run(exp));
  std::vector<std::string> tr = {kPython, kModels + "/torch_reference.py"};
  tr.insert(tr.end(), ex.knobs.begin(), ex.knobs.end());
  for (const char* a : {"--seed", "3", "--batch", "4", "--batch-seed", "5", "--lr", "0.05",
                        "--momentum", "0.9", "--weight-decay", "0.0001", "--out"}) {
    tr.emplace_back(a);
  }
  tr.push_back(ref);
  ASSERT_NO_FATAL_FAILURE(Run(tr));
  StatusOr<std::string> text = ReadFile(ref, size_t{256} << 20);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json want = nlohmann::json::parse(*text);

  TrainingArgs args;
  args.model = "file";
  args.modelFile = onnx;
  args.learningRate = want.at("lr").get<double>();
  args.momentum = want.at("momentum").get<double>();
  args.weightDecay = want.at("weight_decay").get<double>();
  StatusOr<std::unique_ptr<Model>> model = LoadModel(args, ex.input_chw, 10, kBatch);
  ASSERT_TRUE(model.ok()) << model.status();
  Model& m = **model;
  m.InitParams(args.seed);

  Tensor x({kBatch, ex.input_chw[0], ex.input_chw[1], ex.input_chw[2]});
  x.data = Floats(want.at("inputs").at("data"));  // token ids are exact as floats
  std::vector<int32_t> labels = want.at("labels").get<std::vector<int32_t>>();
  std::vector<Tensor> buffers = m.InitialBuffers();
  uint64_t counter = 0;
  LayerContext ctx{true, &buffers, DeriveKey(1, 2), &counter, nullptr};
  const Tensor& logits = m.Forward(x, ctx);
  ExpectClose("logits", logits.data, Floats(want.at("logits")));
  Tensor dlogits(logits.shape);
  const float loss =
      cpu::SoftmaxCrossEntropy(kBatch, 10, logits.ptr(), labels.data(), dlogits.ptr());
  ExpectClose("loss", {loss}, {want.at("loss").get<float>()});
  m.Backward(dlogits, ctx);

  const nlohmann::json& grads = want.at("grads");
  EXPECT_EQ(m.params().size(), grads.size()) << "parameters the loss depends on";
  for (const Param* p : m.params()) {
    ASSERT_TRUE(grads.contains(p->name)) << p->name << " is not a PyTorch parameter";
    ExpectClose("gradient of " + p->name, p->grad.data, Floats(grads.at(p->name)));
  }
  std::unique_ptr<Optimizer> sgd = MakeOptimizer(args, m.params());
  sgd->Step(m.params(), static_cast<float>(args.learningRate));
  for (const Param* p : m.params()) {
    ExpectClose("updated " + p->name, p->value.data, Floats(want.at("params_after").at(p->name)));
  }
  const std::vector<std::string> names = m.BufferNames();
  ASSERT_EQ(names.size(), buffers.size());
  for (size_t k = 0; k < names.size(); ++k) {
    ASSERT_TRUE(want.at("buffers_after").contains(names[k])) << names[k];
    ExpectClose("running statistic " + names[k], buffers[k].data,
                Floats(want.at("buffers_after").at(names[k])));
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, TorchReference, ::testing::ValuesIn(Examples()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace easyscale
