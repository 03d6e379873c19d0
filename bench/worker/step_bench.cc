// step_bench: the wall time of one training step of one worker (EstWorker::Step:
// every hosted EST's forward and backward pass on its own micro-batch, exact
// fixed-point aggregation, the optimizer), on a backend, as a JSON line. The
// GPU figures are compared with PyTorch's step on the same GPU
// (bench/cuda/torch_step_bench.py, the same model, batch and SGD) and with one
// EST of the whole batch (--ests 1 --batch ests*batch) in bench/cuda/step_run.sh.
// A user's model from an ONNX file (--model-file, CPU) is compared with
// PyTorch on the same CPU by bench/worker/graph_vs_torch.sh.
//   step_bench [--backend cpu|cuda] [--model cnn|mlp] [--model-file M.onnx]
//              [--dataset synthetic|tokens] [--ests 1] [--batch 64]
//              [--lanes 0] [--steps 200] [--warmup 20] [--data FILE]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "easyscale/common/flags.h"
#include "easyscale/worker/collective.h"
#include "easyscale/worker/est_worker.h"

using namespace easyscale;

namespace {

int Run(int argc, char** argv) {
  std::string backend = "cpu", model = "cnn", model_file, dataset = "synthetic", data_path;
  int ests = 1, batch = 64, steps = 200, warmup = 20, lanes = 0;
  FlagSet f("step_bench [flags]: median wall time of one worker's training step");
  f.String("backend", &backend, "cpu | cuda");
  f.String("model", &model, "cnn | mlp");
  f.String("model-file", &model_file, "an ONNX model to train instead (the graph runtime)");
  f.String("dataset", &dataset, "synthetic | tokens (when no --data)");
  f.Int("ests", &ests, "ESTs hosted by the worker (the job's N)", 1, 256);
  f.Int("batch", &batch, "micro-batch of one EST", 1, 8192);
  f.Int("lanes", &lanes, "ESTs side by side (0: the backend's count)", 0, 256);
  f.Int("steps", &steps, "timed steps", 1, 100000);
  f.Int("warmup", &warmup, "untimed steps first", 0, 100000);
  f.String("data", &data_path, "digits file (default: a synthetic set of 28x28 images)");
  auto rest = f.Parse(argc, argv);
  if (!rest.ok() || f.help_requested()) {
    std::fprintf(stderr, "%s\n", rest.ok() ? f.Help().c_str() : rest.status().ToString().c_str());
    return rest.ok() ? 0 : 2;
  }
  TrainingArgs args;
  args.model = model_file.empty() ? model : "file";
  args.modelFile = model_file;
  args.batchPerEst = batch;
  args.steps = warmup + steps;
  args.augment = false;  // PyTorch's side feeds one fixed tensor: no data pipeline either way
  args.checkpointEvery = 0;
  Dataset data;
  if (dataset == "tokens") {
    data = MakeTokenDataset(std::max<size_t>(4096, size_t(ests) * batch * 2), 32, 128, 10, 11);
  } else if (data_path.empty()) {
    data = MakeSyntheticDataset(std::max<size_t>(4096, size_t(ests) * batch * 2), 1, 28, 28, 10, 7);
  } else {
    auto loaded = LoadDataset(data_path);
    if (!loaded.ok()) {
      std::fprintf(stderr, "step_bench: %s\n", loaded.status().ToString().c_str());
      return 1;
    }
    data = std::move(*loaded);
  }
  WorkerConfig config;
  config.args = args;
  config.total_ests = ests;
  for (int e = 0; e < ests; ++e) config.ests.push_back(e);
  config.backend = backend;
  config.lanes = lanes;
  auto comm = MakeSingleProcessCollective();
  auto worker = EstWorker::Create(config, data, *comm);
  if (!worker.ok()) {
    std::fprintf(stderr, "step_bench: %s\n", worker.status().ToString().c_str());
    return 1;
  }
  (*worker)->Initialize();
  std::vector<double> ms;
  for (int i = 0; i < warmup + steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto s = (*worker)->Step(false);
    const double elapsed =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!s.ok()) {
      std::fprintf(stderr, "step_bench: %s\n", s.status().ToString().c_str());
      return 1;
    }
    if (i >= warmup) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const int global = ests * batch;
  std::printf("%s\n", nlohmann::json{{"bench", "step"},
                                     {"backend", backend},
                                     {"model", model_file.empty() ? model : model_file},
                                     {"ests", ests},
                                     {"lanes", lanes},
                                     {"batch_per_est", batch},
                                     {"global_batch", global},
                                     {"median_ms", median},
                                     {"p10_ms", ms[ms.size() / 10]},
                                     {"p90_ms", ms[ms.size() * 9 / 10]},
                                     {"samples_per_s", global / (median / 1000.0)}}
                          .dump()
                          .c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
