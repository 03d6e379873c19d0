#include "easyscale/worker/worker_process.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>

#include "easyscale/common/checks.h"
#include "easyscale/common/log.h"
#include "easyscale/worker/checkpoint.h"
#include "easyscale/worker/model_output.h"

namespace easyscale {
namespace {

std::atomic<bool> g_stop_signal{false};

void OnStopSignal(int) { g_stop_signal.store(true); }

void PrintEvent(const nlohmann::json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

std::function<bool()> InstallStopSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  return [] { return g_stop_signal.load(); };
}

bool IsPermanentWorkerError(const Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsDataLoss(s) || absl::IsFailedPrecondition(s) ||
         absl::IsNotFound(s);
}

StatusOr<Dataset> LoadTrainingData(const TrainingArgs& args, const std::string& digits_file) {
  StatusOr<Dataset> data;
  if (!args.data.empty()) {
    UserDataOptions o;
    o.image_shape = [&args] { return ModelImageShape(args); };
    data = LoadUserData(args.data, o);
  } else if (args.dataset == "synthetic") {
    data = MakeSyntheticDataset(4096, 1, 28, 28, 10, 7);
  } else if (args.dataset == "tokens") {
    data = MakeTokenDataset(10000, 32, 128, 10, 11);
  } else if (digits_file.empty()) {
    return absl::InvalidArgumentError("--digits-file: no digits file given");
  } else {
    data = LoadDataset(digits_file);
  }
  if (!data.ok()) return data;
  ES_RETURN_IF_ERROR(SetNormalization(args.normalizeMean, args.normalizeStd, &*data));
  return data;
}

StatusOr<std::optional<TrainingSnapshot>> LoadNewestCheckpoint(const std::string& dir,
                                                               int total_ests) {
  CheckpointStore store(dir);
  ES_ASSIGN_OR_RETURN(const RestorePoint point, store.NewestRestorable());
  if (!point.skipped.empty() || !point.latest.empty()) {
    LogWarn("worker",
            point.step ? "resuming from the newest intact checkpoint"
                       : "no committed checkpoint; starting at step 0",
            {{"dir", dir},
             {"step", point.step.value_or(0)},
             {"skipped", point.skipped},
             {"latest", point.latest}});
  }
  if (!point.step) return std::optional<TrainingSnapshot>();
  ES_ASSIGN_OR_RETURN(TrainingSnapshot s, store.Load(*point.step, total_ests));
  return std::optional<TrainingSnapshot>(std::move(s));
}

StatusOr<WorkerOutcome> RunGeneration(const WorkerAssignment& a, const Dataset& data,
                                      const std::optional<TrainingSnapshot>& start,
                                      const WorkerProcessOptions& options) {
  CollectiveOptions copts;
  copts.bind_host = options.bind_host;
  copts.timeout = options.collective_timeout;
  copts.job = a.job;
  copts.token = options.token;
  // Rank 0 writes the trained model: a folder it cannot write fails now, not
  // after the training.
  const bool model_writer = a.rank == 0 && !a.output.path.empty();
  if (model_writer) ES_RETURN_IF_ERROR(CheckOutputFolder(a.output.path));
  ES_ASSIGN_OR_RETURN(auto host, ConnectCollective(a.rendezvous, a.rank, a.worldSize, copts));
  ES_ASSIGN_OR_RETURN(auto comm, UseDeviceCollective(std::move(host), a.backend == "cuda", a.rank));
  WorkerConfig config;
  config.args = a.training;
  config.total_ests = a.totalEsts;
  config.ests = a.ests;
  config.hooks = options.hooks;
  config.backend = a.backend;
  config.device = a.rank;
  ES_ASSIGN_OR_RETURN(auto worker, EstWorker::Create(config, data, *comm));
  if (start) {
    ES_RETURN_IF_ERROR(worker->Restore(*start, "the generation's starting state"));
  } else {
    worker->Initialize();
  }
  if (options.on_restored) options.on_restored(worker->step());
  const bool printer = options.print_progress && a.rank == 0;
  auto write_model = [&](const std::string& dir) -> StatusOr<OutputDigests> {
    ES_ASSIGN_OR_RETURN(const TrainedModel model, worker->Trained());
    ES_ASSIGN_OR_RETURN(OutputDigests written, WriteTrainedModel(model, dir));
    if (printer) {
      nlohmann::json event = {{"event", "output"}, {"step", model.step}};
      event.update(ToJson(written));
      PrintEvent(event);
    }
    return written;
  };
  // Rank 0 holds every EST's context after each step: it alone writes.
  const bool writer = a.rank == 0 && !a.checkpointDir.empty();
  auto save = [&]() -> Status {
    if (!writer) return absl::OkStatus();
    ES_RETURN_IF_ERROR(CheckpointStore(a.checkpointDir).Save(worker->Snapshot(), a.totalEsts));
    if (!model_writer || !a.output.everyCheckpoint) return absl::OkStatus();
    return write_model(StepOutputFolder(a.output.path, worker->step())).status();
  };
  const int64_t stop_at =
      a.stopAtStep > 0 ? std::min(a.stopAtStep, a.training.steps) : a.training.steps;
  const double samples_per_step = static_cast<double>(a.totalEsts) * a.training.batchPerEst;
  WorkerOutcome out;
  bool stop = a.action == WorkerAction::kCheckpointAndStop;
  while (!stop && worker->step() < stop_at) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool vote = options.stop_requested && options.stop_requested();
    StatusOr<StepStats> s = worker->Step(vote);
    if (absl::IsUnavailable(s.status())) {  // a peer is gone; the step was rolled back
      out.interrupted = s.status();
      break;
    }
    ES_RETURN_IF_ERROR(s.status());
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Every worker holds the whole job's state after a step: rank 0 alone certifies.
    std::optional<Certificate> certificate;
    if (a.rank == 0 && a.certificateEvery > 0 && s->step % a.certificateEvery == 0) {
      certificate = Certificate{.step = s->step, .digest = worker->Digest()};
      if (options.on_certificate) options.on_certificate(*certificate);
    }
    if (options.on_step) options.on_step(*s);
    if (printer) {
      PrintEvent(
          {{"event", "step"},
           {"ts", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                      .count()},
           {"generation", a.generation},
           {"step", s->step},
           {"loss", s->loss},
           {"samples_per_s", samples_per_step / dt},
           {"workers", a.worldSize},
           {"ests_on_rank0", a.ests.size()},
           {"allreduce_ms", s->allreduce_seconds * 1e3}});
      if (certificate) {
        PrintEvent({{"event", "certificate"},
                    {"step", certificate->step},
                    {"digest", certificate->digest}});
      }
    }
    const int64_t every = a.training.checkpointEvery;
    stop = s->stop;
    if (!stop && every > 0 && s->step % every == 0 && s->step < stop_at) ES_RETURN_IF_ERROR(save());
  }
  if (printer && worker->step() < a.training.steps)
    PrintEvent({{"event", "stopping"}, {"step", worker->step()}});
  ES_RETURN_IF_ERROR(save());
  out.step = worker->step();
  out.snapshot = worker->Snapshot();
  if (out.step < a.training.steps || !out.interrupted.ok()) return out;
  out.state = WorkerState::kSucceeded;
  if (a.rank == 0) {
    ES_ASSIGN_OR_RETURN(out.result, EstWorker::Finalize(config, data, out.snapshot));
    if (model_writer) {
      ES_ASSIGN_OR_RETURN(out.output, write_model(a.output.path));
    }
    if (printer) {
      PrintEvent({{"event", "done"},
                  {"step", out.step},
                  {"digest", out.result.digest},
                  {"test_accuracy", out.result.test_accuracy}});
    }
  }
  return out;
}

}  // namespace easyscale
