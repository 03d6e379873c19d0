// est_bench: what hosting ESTs costs on one worker.
//   1. Throughput of N ESTs (each its own micro-batch, RNG streams, cursor, BN
//      statistics, exact fixed-point aggregation) against a plain gradient-
//      accumulation loop doing the same work: the same model, the same
//      micro-batches, fp32 gradients summed in place, one optimizer step.
//   2. The overhead per EST switch = (EST step - plain step) / N.
// Both are measured in the same run, in alternating pairs; the ratio is the
// median of the pairs' ratios.
//   build/bin/est_bench [--ests 8] [--batch 16] [--steps 20] [--reps 5] [--model cnn]
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "easyscale/common/flags.h"
#include "easyscale/worker/cpu_kernels.h"
#include "easyscale/worker/est_worker.h"

using namespace easyscale;
using Clock = std::chrono::steady_clock;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The baseline: what a plain loop with gradient accumulation does per step.
class PlainAccumulation {
 public:
  PlainAccumulation(const TrainingArgs& args, const Dataset& data, int ests)
      : args_(args), data_(data), ests_(ests) {
    model_ = std::move(*BuildModel(args.model, {1, 28, 28}, 10, args.batchPerEst));
    model_->InitParams(args.seed);
    optimizer_ = MakeOptimizer(args, model_->params());
    buffers_ = model_->InitialBuffers();
    for (Param* p : model_->params()) sums_.emplace_back(p->grad.shape);
    split_ = SplitTrainTest(data.count());
  }
  void Step() {
    for (Tensor& s : sums_) s.Zero();
    for (int e = 0; e < ests_; ++e) {
      samples_.clear();
      for (int i = 0; i < args_.batchPerEst; ++i)
        samples_.push_back(split_.train[(cursor_++) % split_.train.size()]);
      MakeBatch(data_, samples_, nullptr, &x_, &labels_);
      PassContext lc{true, &buffers_, DeriveKey(1, 1), &dropout_counter_};
      const Tensor& logits = model_->Forward(x_, lc);
      dl_.Resize(logits.shape);
      cpu::SoftmaxCrossEntropy(logits.dim(0), logits.dim(1), logits.ptr(), labels_.data(),
                               dl_.ptr());
      model_->Backward(dl_, lc);
      const auto& ps = model_->params();
      for (size_t i = 0; i < ps.size(); ++i) {
        for (size_t j = 0; j < ps[i]->grad.size(); ++j) sums_[i].data[j] += ps[i]->grad.data[j];
      }
    }
    const auto& ps = model_->params();
    for (size_t i = 0; i < ps.size(); ++i) {
      for (size_t j = 0; j < ps[i]->grad.size(); ++j)
        ps[i]->grad.data[j] = sums_[i].data[j] / ests_;
    }
    optimizer_->Step(CpuKernelBackend(), ps, 0.01f);
  }

 private:
  TrainingArgs args_;
  const Dataset& data_;
  int ests_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<Tensor> buffers_, sums_;
  DataSplit split_;
  std::vector<uint32_t> samples_;
  std::vector<int32_t> labels_;
  Tensor x_, dl_;
  uint64_t dropout_counter_ = 0, cursor_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int ests = 8, steps = 10, reps = 21;
  TrainingArgs args;
  args.dataset = "synthetic";
  args.augment = false;  // the baseline does no augmentation either
  args.checkpointEvery = 0;
  FlagSet f("est_bench [flags]");
  f.Int("ests", &ests, "ESTs on the one worker");
  f.Int("batch", &args.batchPerEst, "micro-batch per EST");
  f.Int("steps", &steps, "steps per repetition");
  f.Int("reps", &reps, "repetitions (median reported)");
  f.String("model", &args.model, "mlp | cnn");
  auto rest = f.Parse(argc, argv);
  if (!rest.ok() || f.help_requested()) {
    std::fprintf(stderr, "%s\n%s", rest.ok() ? "" : std::string(rest.status().message()).c_str(),
                 f.Help().c_str());
    return rest.ok() ? 0 : 2;
  }
  args.steps = 1000000;
  const Dataset data = MakeSyntheticDataset(4096, 1, 28, 28, 10, 7);
  auto comm = MakeSingleProcessCollective();
  std::vector<int> all;
  for (int e = 0; e < ests; ++e) all.push_back(e);
  WorkerConfig config{args, ests, all};
  auto worker = EstWorker::Create(config, data, *comm);
  if (!worker.ok()) {
    std::fprintf(stderr, "est_bench: %s\n", std::string(worker.status().message()).c_str());
    return 1;
  }
  (*worker)->Initialize();
  PlainAccumulation plain(args, data, ests);
  // Warm-up both.
  for (int i = 0; i < 3; ++i) {
    (void)(*worker)->Step(false);
    plain.Step();
  }
  // Paired repetitions in alternating order; the ratio is the median of the
  // pairs' ratios, which cancels most of the noise of a shared machine.
  std::vector<double> est_t, plain_t, ratios;
  auto time_est = [&] {
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) (void)(*worker)->Step(false);
    return std::chrono::duration<double>(Clock::now() - t0).count() / steps;
  };
  auto time_plain = [&] {
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) plain.Step();
    return std::chrono::duration<double>(Clock::now() - t0).count() / steps;
  };
  for (int r = 0; r < reps; ++r) {
    double e, p;
    if (r % 2 == 0) {
      e = time_est();
      p = time_plain();
    } else {
      p = time_plain();
      e = time_est();
    }
    est_t.push_back(e);
    plain_t.push_back(p);
    ratios.push_back(p / e);
  }
  const double est_s = Median(est_t), plain_s = Median(plain_t), ratio = Median(ratios);
  const double samples = static_cast<double>(ests) * args.batchPerEst;
  std::printf(
      "{\"bench\":\"est_vs_plain_accumulation\",\"model\":\"%s\",\"ests\":%d,\"batch_per_est\":%d,"
      "\"est_step_ms\":%.3f,\"plain_step_ms\":%.3f,\"est_samples_per_s\":%.1f,"
      "\"plain_samples_per_s\":%.1f,\"throughput_ratio\":%.4f,\"overhead_per_est_switch_us\":%.1f}"
      "\n",
      args.model.c_str(), ests, args.batchPerEst, est_s * 1e3, plain_s * 1e3, samples / est_s,
      samples / plain_s, ratio, (est_s - plain_s) / ests * 1e6);
  return 0;
}
