// `easyscale-worker k8s` against a control server that plays the operator's
// side of the protocol (common/control_protocol.h): three real worker
// processes, generation 1 with two of them, then generation 2 with all three
// while training runs; the new one takes the state from the others over the
// network, and they meet through the server's rendezvous store. No
// checkpoint is written to disk. The digest must equal the local run of the
// same job, and so must the trained model rank 0 writes into the assignment's
// output folder, whose SHA-256 it reports.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "data/testing/image_files.h"
#include "easyscale/common/control_protocol.h"
#include "easyscale/common/est_assignment.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/rendezvous_store.h"
#include "easyscale/common/sha256.h"
#include "easyscale/common/subprocess.h"
#include "easyscale/worker/dataset.h"

namespace easyscale {
namespace {

constexpr int kEsts = 8;
constexpr int kSteps = 40;

TrainingArgs Job() {
  TrainingArgs t;
  t.steps = kSteps;
  t.checkpointEvery = 10;
  return t;
}

constexpr const char* kToken = "k8s-mode-test-token";

class TestOperator {
 public:
  TestOperator(TrainingArgs job, std::string output_dir)
      : job_(std::move(job)), output_dir_(std::move(output_dir)) {
    auto authorized = [](const httplib::Request& req) {
      return TokenFromAuthorization(req.get_header_value(kAuthorizationHeader)) == kToken;
    };
    server_.Get(
        "/v1/assignment", [this, authorized](const httplib::Request& req, httplib::Response& res) {
          if (!authorized(req)) {
            res.status = 401;
            return;
          }
          std::lock_guard<std::mutex> lock(mu_);
          const std::string pod = req.get_param_value("pod");
          auto it = members_.find(pod);
          if (it == members_.end()) {
            res.status = 404;
            return;
          }
          WorkerAssignment a;
          a.job = "default/mnist";
          a.generation = generation_;
          a.rank = it->second;
          a.worldSize = static_cast<int>(members_.size());
          a.totalEsts = kEsts;
          a.ests = AssignContiguous(kEsts, a.worldSize)->workers[a.rank];
          a.rendezvous = {"http://127.0.0.1:" + std::to_string(port_),
                          "gen-" + std::to_string(generation_)};
          a.training = job_;
          a.output.path = output_dir_;
          a.action = checkpointed_ >= previous_size_ ? WorkerAction::kRun : WorkerAction::kWait;
          if (!sources_.empty()) a.restore = {RestoreFrom::kPeers, restore_step_, sources_};
          res.set_content(ToJson(a).dump(), "application/json");
        });
    server_.Post("/v1/report",
                 [this, authorized](const httplib::Request& req, httplib::Response& res) {
                   auto r = ParseWorkerReport(nlohmann::json::parse(req.body, nullptr, false));
                   if (!authorized(req) || !r.ok()) {
                     res.status = authorized(req) ? 400 : 401;
                     return;
                   }
                   std::lock_guard<std::mutex> lock(mu_);
                   if (r->state == WorkerState::kCheckpointed && r->generation == generation_ - 1 &&
                       r->stateStep >= 0 && counted_.insert(r->pod).second) {
                     ++checkpointed_;
                     restore_step_ = r->stateStep;
                     sources_.push_back({r->pod, r->stateUrl});
                   }
                   if (r->state == WorkerState::kRunning && r->generation == generation_)
                     max_step_ = std::max(max_step_, r->step);
                   if (r->state == WorkerState::kSucceeded && r->rank == 0) {
                     digest_ = r->digest;
                     output_ = r->output;
                   }
                   res.status = 204;
                 });
    auto store = [this, authorized](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req)) {
        res.status = 401;
        return;
      }
      HttpRequest request;
      request.method = req.method;
      request.query = {{"key", req.get_param_value("key")}};
      request.body = req.body;
      const HttpResponse answer = ServeRendezvousStore(request, store_);
      res.status = answer.status;
      res.set_content(answer.body, answer.contentType);
    };
    server_.Get("/v1/store", store);
    server_.Put("/v1/store", store);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~TestOperator() {
    server_.stop();
    thread_.join();
  }
  void SetGeneration(std::vector<std::string> pods) {
    std::lock_guard<std::mutex> lock(mu_);
    previous_size_ = generation_ == 0 ? 0 : static_cast<int>(members_.size());
    checkpointed_ = 0;
    counted_.clear();
    sources_.clear();
    ++generation_;
    store_.SetPrefix("gen-" + std::to_string(generation_));
    max_step_ = 0;
    members_.clear();
    for (size_t i = 0; i < pods.size(); ++i) members_[pods[i]] = static_cast<int>(i);
  }
  int64_t max_step() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_step_;
  }
  std::string digest() {
    std::lock_guard<std::mutex> lock(mu_);
    return digest_;
  }
  OutputDigests output() {
    std::lock_guard<std::mutex> lock(mu_);
    return output_;
  }
  int port() const { return port_; }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  RendezvousStore store_;
  int64_t generation_ = 0;
  int previous_size_ = 0, checkpointed_ = 0;
  std::set<std::string> counted_;
  std::vector<StateSource> sources_;  // who holds the state the new generation takes
  int64_t restore_step_ = 0;
  int64_t max_step_ = 0;
  std::map<std::string, int> members_;
  const TrainingArgs job_;
  std::string digest_;
  const std::string output_dir_;
  OutputDigests output_;
};

StatusOr<Subprocess> StartWorker(const std::string& pod, int port) {
  return Subprocess::Start(
      {.argv = {EASYSCALE_WORKER_BIN, "k8s", "--control-url",
                "http://127.0.0.1:" + std::to_string(port), "--job", "default/mnist", "--pod", pod,
                "--state-port", "0", "--digits-file", EASYSCALE_MNIST_DATA},
       .env = {{"EASYSCALE_CONTROL_TOKEN", kToken}},
       .parentDeathSignal = SIGKILL});
}

// The digest of `local` with one worker, the same job (`extra`: its flags
// beyond the defaults).
std::string LocalDigest(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {EASYSCALE_WORKER_BIN,
                                   "local",
                                   "--ests",
                                   "8",
                                   "--steps",
                                   std::to_string(kSteps),
                                   "--schedule",
                                   "0:1",
                                   "--digits-file",
                                   EASYSCALE_MNIST_DATA};
  argv.insert(argv.end(), extra.begin(), extra.end());
  StatusOr<CommandResult> r =
      RunCommand({.argv = argv, .stdoutTo = Output::Pipe()}, std::chrono::minutes(5));
  std::smatch m;
  return r.ok() && std::regex_search(r->out, m, std::regex("digest: ([0-9a-f]{64})"))
             ? std::string(m[1])
             : "";
}

std::string FileSha256(const std::string& path) {
  StatusOr<std::string> bytes = ReadFile(path, 64 << 20);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? Sha256Hex(bytes->data(), bytes->size()) : "";
}

// Two workers, then three while it trains: the digest of one local worker.
// Rank 0 writes the model into `output_dir` (when set) and its report lands
// in `output`.
void ScaleOutAndCompare(const TrainingArgs& job, const std::vector<std::string>& local_flags,
                        const std::string& output_dir = "", OutputDigests* output = nullptr) {
  TestOperator op(job, output_dir);
  op.SetGeneration({"w-a", "w-b"});
  std::vector<Subprocess> workers;
  for (const char* pod : {"w-a", "w-b", "w-c"}) {
    StatusOr<Subprocess> w = StartWorker(pod, op.port());
    ASSERT_TRUE(w.ok()) << w.status();
    workers.push_back(std::move(*w));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (op.max_step() < 8 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(op.max_step(), 8) << "generation 1 did not train";
  op.SetGeneration({"w-a", "w-b", "w-c"});  // scale out while it trains
  while (op.digest().empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (Subprocess& w : workers) w.Wait(std::chrono::seconds(10));
  workers.clear();  // kills any still running
  ASSERT_EQ(op.digest().size(), 64u);
  EXPECT_EQ(op.digest(), LocalDigest(local_flags));
  if (output) *output = op.output();
}

TEST(K8sMode, FollowsGenerationsAndKeepsTheDigest) {
  namespace fs = std::filesystem;
  const fs::path k8s_out = fs::path(::testing::TempDir()) / "k8s-mode-output";
  const fs::path local_out = fs::path(::testing::TempDir()) / "k8s-mode-local-output";
  for (const fs::path& dir : {k8s_out, local_out}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  OutputDigests output;
  ScaleOutAndCompare(Job(), {"--output", local_out.string()}, k8s_out.string(), &output);
  // Rank 0 wrote the model where the assignment says and reported its digest.
  const std::string safetensors = (k8s_out / "model.safetensors").string();
  EXPECT_EQ(output, (OutputDigests{.path = k8s_out.string(),
                                   .safetensorsSha256 = FileSha256(safetensors)}));
  EXPECT_EQ(FileSha256(safetensors), FileSha256((local_out / "model.safetensors").string()));
}

// Users' data reaches k8s workers through the assignment's training
// arguments: uint8 digits in a safetensors file, normalised.
TEST(K8sMode, TrainsUsersDataFromTheTrainingArguments) {
  auto digits = LoadDataset(EASYSCALE_MNIST_DATA);
  ASSERT_TRUE(digits.ok()) << digits.status();
  constexpr int64_t kSamples = 2000;
  const std::vector<int64_t> labels(digits->labels.begin(), digits->labels.begin() + kSamples);
  const std::vector<uint8_t> pixels(digits->pixels.begin(),
                                    digits->pixels.begin() + kSamples * 784);
  const std::string path = ::testing::TempDir() + "/k8s-digits.safetensors";
  ASSERT_TRUE(WriteFileAtomic(
                  path, data::testing::EncodeSafetensors(
                            {{"inputs", "U8", {kSamples, 1, 28, 28}, data::testing::Bytes(pixels)},
                             {"labels", "I64", {kSamples}, data::testing::Bytes(labels)}}))
                  .ok());
  TrainingArgs job = Job();
  job.data = path;
  job.normalizeMean = {0.1307};
  job.normalizeStd = {0.3081};
  ScaleOutAndCompare(job,
                     {"--data", path, "--normalize-mean", "0.1307", "--normalize-std", "0.3081"});
}

}  // namespace
}  // namespace easyscale
