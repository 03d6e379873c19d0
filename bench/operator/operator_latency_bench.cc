// operator_latency_bench: in the end-to-end test cluster (test API server over
// HTTPS, easyscale-operator process, stand-in kubelet, real easyscale-worker k8s
// processes when built, else protocol stand-ins), measures
//   release: an inference pod on n1 goes away -> the first worker pod on n1 exists
//            (goal < 1 s), and -> the new generation runs
//   claim:   an inference pod wants n1's GPUs -> the worker pods on n1 are gone
//            (checkpointed, stopped by the kubelet, deletion confirmed), i.e. the
//            GPUs are free (goal < one mini-batch + 1 s), and -> the inference pod runs
// and prints one JSON line per measurement and a summary.
//   operator_latency_bench [--rounds N] [--protocol-workers]
#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "controller/gpu_inventory.h"
#include "pod_runtimes.h"
#include "test_cluster.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Worker pods on `node`, terminating ones included: a GPU is free once the
// kubelet has stopped the worker and the pod object is gone.
int WorkersOn(TestCluster& c, const std::string& node) {
  int n = 0;
  for (const json& p : c.WorkerPods("j")) n += p["spec"].value("nodeName", "") == node;
  return n;
}

bool PodRunning(TestCluster& c, const std::string& name) {
  StatusOr<json> p = c.client().Get(kPods, "default", name);
  return p.ok() && (*p)["status"].value("phase", "") == "Running";
}

struct Summary {
  std::vector<double> values;
  // `goal` <= 0: a figure without a goal.
  void Print(const char* name, double goal) {
    std::sort(values.begin(), values.end());
    const double median = values.empty() ? 0 : values[values.size() / 2];
    const double max = values.empty() ? 0 : values.back();
    const std::string goalText = goal > 0 ? absl::StrFormat("%.3f", goal) : "null";
    const char* met = goal > 0 ? (max < goal ? "true" : "false") : "null";
    std::printf(
        "{\"bench\":\"operator_latency\",\"summary\":\"%s\",\"n\":%zu,\"median_s\":%.4f,"
        "\"max_s\":%.4f,\"goal_s\":%s,\"met\":%s}\n",
        name, values.size(), median, max, goalText.c_str(), met);
  }
};

int Main(int argc, char** argv) {
  int rounds = 5;
  bool protocolWorkers = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc && absl::SimpleAtoi(argv[i + 1], &rounds) && rounds > 0) {
      ++i;
    } else if (a == "--protocol-workers") {
      protocolWorkers = true;
    } else {
      std::fprintf(stderr, "usage: operator_latency_bench [--rounds N>0] [--protocol-workers]\n");
      return 2;
    }
  }
  const std::string worker = protocolWorkers ? "" : WorkerBinary();
  TestCluster c("operator-bench");
  if (Status s = c.StartApiServer(); !s.ok()) {
    std::fprintf(stderr, "operator_latency_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  if (Status s = c.AddTwoNodesWithInference("inf-0"); !s.ok()) {
    std::fprintf(stderr, "operator_latency_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  OperatorProcess* op = nullptr;
  if (worker.empty()) {
    c.StartKubelet(std::make_unique<ProtocolWorkerRuntime>(50ms));
    op = c.StartOperator("bench", {"--worker-backend", "cpu"});
  } else {
    op = c.StartWithRealWorkers("bench", worker);
  }
  if (!Eventually([&] { return op->Ready(); }, 20s)) {
    std::fprintf(stderr, "operator_latency_bench: the operator did not get ready (%s)\n",
                 c.dir().c_str());
    return 1;
  }
  const json spec = {{"image", "easyscale/worker:bench"},
                     {"ests", 8},
                     {"maxWorkers", 4},
                     {"training", {{"model", "mlp"}, {"steps", 1000000}, {"checkpointEvery", 50}}},
                     {"checkpoint", {{"mountPath", c.dir() + "/ckpt"}}}};
  (void)c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", spec));
  if (!Eventually([&] { return c.JobStatus("j").value("step", 0) > 5; }, 60s)) {
    std::fprintf(stderr, "operator_latency_bench: the job does not train (%s)\n", c.dir().c_str());
    return 1;
  }
  // The mini-batch time, from the step count the workers report.
  const int64_t s0 = c.JobStatus("j").value("step", 0);
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(3s);
  const double miniBatch = Since(t0) / std::max<int64_t>(1, c.JobStatus("j").value("step", 0) - s0);
  std::printf("{\"bench\":\"operator_latency\",\"workers\":\"%s\",\"mini_batch_s\":%.4f}\n",
              worker.empty() ? "protocol stand-ins" : "easyscale-worker k8s", miniBatch);

  Summary releaseToPod, releaseToRun, claimToFreed, claimToInference;
  for (int r = 1; r <= rounds; ++r) {
    // Release: inference leaves n1.
    const std::string held = "inf-" + std::to_string(r - 1);
    auto start = Clock::now();
    (void)c.client().Delete(kPods, "default", held);
    if (!Eventually([&] { return WorkersOn(c, "n1") > 0; }, 30s)) break;
    releaseToPod.values.push_back(Since(start));
    if (!Eventually(
            [&] {
              const json st = c.JobStatus("j");
              return st.value("runningGeneration", 0) == st.value("generation", -1) &&
                     st.value("workers", json::array()).size() == 4;
            },
            60s)) {
      break;
    }
    releaseToRun.values.push_back(Since(start));
    std::this_thread::sleep_for(1s);  // train a little in the new generation

    // Claim: inference wants both GPUs of n1 back.
    const std::string claim = "inf-" + std::to_string(r);
    start = Clock::now();
    (void)c.client().Create(kPods, "default", InferencePod(claim, "n1", 2));
    if (!Eventually([&] { return WorkersOn(c, "n1") == 0; }, 60s)) break;
    claimToFreed.values.push_back(Since(start));
    if (!Eventually([&] { return PodRunning(c, claim); }, 30s)) break;
    claimToInference.values.push_back(Since(start));
    std::printf(
        "{\"bench\":\"operator_latency\",\"round\":%d,\"release_to_pod_s\":%.4f,\"release_to_run_"
        "s\":%.4f,"
        "\"claim_to_freed_s\":%.4f,\"claim_to_inference_running_s\":%.4f}\n",
        r, releaseToPod.values.back(), releaseToRun.values.back(), claimToFreed.values.back(),
        claimToInference.values.back());
    std::fflush(stdout);
    std::this_thread::sleep_for(1s);
  }
  releaseToPod.Print("release_to_worker_pod", 1.0);
  releaseToRun.Print("release_to_generation_running", 0);
  claimToFreed.Print("claim_to_gpu_freed", miniBatch + 1.0);
  claimToInference.Print("claim_to_inference_running", 0);
  return static_cast<int>(releaseToPod.values.size()) == rounds ? 0 : 1;
}

}  // namespace
}  // namespace easyscale::op::testing

int main(int argc, char** argv) { return easyscale::op::testing::Main(argc, argv); }
