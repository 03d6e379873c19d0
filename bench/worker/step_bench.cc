// step_bench: the wall time of one training step of one worker (EstWorker::Step:
// every hosted EST's forward and backward pass on its own micro-batch, exact
// fixed-point aggregation, the optimizer), on a backend, as a JSON line. The
// GPU figures are compared with PyTorch's step on the same GPU
// (bench/cuda/torch_step_bench.py, the same model, batch and SGD) and with one
// EST of the whole batch (--ests 1 --batch ests*batch) in bench/cuda/step_run.sh.
// A user's model from an ONNX file (--model-file) is compared with PyTorch on
// the same CPU by bench/worker/graph_vs_torch.sh, on the same GPU by
// bench/cuda/models_run.sh. The synthetic data takes the file's input: images
// of its [C, H, W], or token ids of its sequence length (ids below --vocab,
// which must not exceed the model's embedding rows).
//   step_bench [--backend cpu|cuda] [--model cnn|mlp] [--model-file M.onnx]
//              [--dataset synthetic|tokens] [--seq-len 0] [--vocab 128]
//              [--ests 1] [--batch 64] [--lanes 0] [--steps 200] [--warmup 20]
//              [--data FILE] [--profile-ops] [--profile-nodes]
// --profile-ops runs each pass op by op (no CUDA graph replay; a device waits
// after each pass) and adds a JSON line of each op type's milliseconds per
// timed step, forward and backward, largest first; --profile-nodes the same
// by node name (which of the model's MatMuls, say). device_peak_mib is the
// most device memory the backend held (KernelBackend::PeakDeviceBytes; 0 on
// the CPU); values_peak_mib the most of a pass's values and gradients in use
// at once (Model::PeakBytesInUse, on any backend: what packing them without
// waste would need).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/flags.h"
#include "easyscale/worker/collective.h"
#include "easyscale/worker/est_worker.h"
#include "easyscale/worker/graph.h"
#include "easyscale/worker/model.h"

using namespace easyscale;

namespace {

// What the synthetic data of a benchmark looks like: images [C, H, W] or token
// sequences of seq_len ids.
struct SyntheticShape {
  bool tokens = false;
  std::vector<int> chw = {1, 28, 28};
  int seq_len = 32;
};

// The data `model_file` takes: its one input's [N, C, H, W] (images) or
// [N, T] (token ids; T from the file, or `seq_len` where the file leaves it
// open). A built-in model (no file) takes the 28x28 digits, or `dataset`
// "tokens" sequences of `seq_len`.
StatusOr<SyntheticShape> DataShapeFor(const std::string& model_file, const std::string& dataset,
                                      int seq_len) {
  SyntheticShape shape;
  shape.tokens = dataset == "tokens";
  if (seq_len > 0) shape.seq_len = seq_len;
  if (model_file.empty()) return shape;
  ES_ASSIGN_OR_RETURN(const std::vector<graph::DataInput> inputs,
                      graph::OnnxDataInputs(model_file));
  if (inputs.size() != 1 || (inputs[0].rank != 2 && inputs[0].rank != 4)) {
    return absl::InvalidArgumentError(model_file +
                                      ": want one data input, [N, C, H, W] images or [N, T] ids");
  }
  const std::vector<int64_t>& dims = inputs[0].dims;
  if (inputs[0].rank == 2) {
    shape.tokens = true;
    if (dims[1] > 0 && seq_len > 0 && dims[1] != seq_len) {
      return absl::InvalidArgumentError(
          absl::StrCat(model_file, ": sequences of ", dims[1], " tokens, not --seq-len ", seq_len));
    }
    if (dims[1] > 0) shape.seq_len = static_cast<int>(dims[1]);
    return shape;
  }
  if (shape.tokens) return absl::InvalidArgumentError(model_file + ": takes images, not tokens");
  TrainingArgs args;
  args.model = "file";
  args.modelFile = model_file;
  ES_ASSIGN_OR_RETURN(shape.chw, ModelImageShape(args));
  return shape;
}

int Run(int argc, char** argv) {
  std::string backend = "cpu", model = "cnn", model_file, dataset = "synthetic", data_path;
  int ests = 1, batch = 64, steps = 200, warmup = 20, lanes = 0, seq_len = 0, vocab = 128;
  FlagSet f("step_bench [flags]: median wall time of one worker's training step");
  f.String("backend", &backend, "cpu | cuda");
  f.String("model", &model, "cnn | mlp");
  f.String("model-file", &model_file, "an ONNX model to train instead (the graph runtime)");
  f.String("dataset", &dataset, "synthetic | tokens (when no --data; a model file decides)");
  f.Int("seq-len", &seq_len, "tokens per sequence (0: the model file's, else 32)", 0, 1 << 16);
  f.Int("vocab", &vocab, "token ids below this (at most the model's embedding rows)", 10, 1 << 30);
  f.Int("ests", &ests, "ESTs hosted by the worker (the job's N)", 1, 256);
  f.Int("batch", &batch, "micro-batch of one EST", 1, 8192);
  f.Int("lanes", &lanes, "ESTs side by side (0: the backend's count)", 0, 256);
  f.Int("steps", &steps, "timed steps", 1, 100000);
  f.Int("warmup", &warmup, "untimed steps first", 0, 100000);
  f.String("data", &data_path, "digits file (default: a synthetic set of 28x28 images)");
  bool profile_ops = false, profile_nodes = false;
  f.Bool("profile-ops", &profile_ops, "also time each op type (runs passes op by op)");
  f.Bool("profile-nodes", &profile_nodes, "as --profile-ops, each node by its name");
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
  if (data_path.empty()) {
    auto shape = DataShapeFor(model_file, dataset, seq_len);
    if (!shape.ok()) {
      std::fprintf(stderr, "step_bench: %s\n", shape.status().ToString().c_str());
      return 1;
    }
    // Two global batches at least; 4096 samples where they take under 64 MiB.
    const size_t sample = shape->tokens ? size_t(shape->seq_len) * 8
                                        : size_t(shape->chw[0]) * shape->chw[1] * shape->chw[2];
    const size_t count =
        std::max(size_t(ests) * batch * 2, std::min<size_t>(4096, (size_t{64} << 20) / sample));
    data = shape->tokens
               ? MakeTokenDataset(count, shape->seq_len, vocab, 10, 11)
               : MakeSyntheticDataset(count, shape->chw[0], shape->chw[1], shape->chw[2], 10, 7);
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
  config.profile_ops = profile_ops || profile_nodes;
  config.profile_by_node = profile_nodes;
  auto comm = MakeSingleProcessCollective();
  auto worker = EstWorker::Create(config, data, *comm);
  if (!worker.ok()) {
    std::fprintf(stderr, "step_bench: %s\n", worker.status().ToString().c_str());
    return 1;
  }
  (*worker)->Initialize();
  // The step's wall time, and its parts as the worker reports them: the hosted
  // ESTs' passes with the sums' download (compute), the collective, the rest
  // (decoding the sums and the optimizer, on the host).
  std::vector<double> ms, compute_ms, allreduce_ms;
  for (int i = 0; i < warmup + steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto s = (*worker)->Step(false);
    const double elapsed =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!s.ok()) {
      std::fprintf(stderr, "step_bench: %s\n", s.status().ToString().c_str());
      return 1;
    }
    if (i < warmup) {
      (*worker)->op_times().clear();
      continue;
    }
    ms.push_back(elapsed);
    compute_ms.push_back(s->compute_seconds * 1e3);
    allreduce_ms.push_back(s->allreduce_seconds * 1e3);
  }
  const auto median_of = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
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
                                     {"compute_ms", median_of(compute_ms)},
                                     {"allreduce_ms", median_of(allreduce_ms)},
                                     {"samples_per_s", global / (median / 1000.0)},
                                     {"device_peak_mib", (*worker)->PeakDeviceBytes() / 1048576.0},
                                     {"values_peak_mib", (*worker)->PeakBytesInUse() / 1048576.0}}
                          .dump()
                          .c_str());
  if (config.profile_ops) {
    std::vector<std::pair<double, std::string>> by_time;
    for (const auto& [op, total] : (*worker)->op_times()) by_time.emplace_back(total / steps, op);
    std::sort(by_time.rbegin(), by_time.rend());
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& [ms, op] : by_time) ops.push_back({{"op", op}, {"ms_per_step", ms}});
    std::printf("%s\n", nlohmann::json{{"bench", "op_times"}, {"ops", ops}}.dump().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
