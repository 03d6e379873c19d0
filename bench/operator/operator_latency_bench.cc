// operator_latency_bench: in the isolated test cluster (pods that share nothing
// but the network, each with its own address; test API server over HTTPS; an
// easyscale-operator process; real `easyscale-worker k8s` processes), how long
// the job's scale events take, each also as a multiple of its step time:
//   scale-out: an inference pod on n1 goes away -> the first step of the new
//              generation (its new workers took the state from the running
//              ones over the network)
//   preemption: an inference pod claims n1's GPUs -> the worker pods on n1 are
//              gone (the GPUs are free; goal < one mini-batch + 1 s)
//   crash:     a worker is SIGKILLed -> the first step of the next generation
//              (goal < 2 s), and how many completed steps were trained again
//              (goal: none but the one in flight)
// Times come from the workers' step events (their "ts") and the bench's clock
// on the same host. One JSON line per round and a summary per measurement.
//   operator_latency_bench [--rounds N] [--model mlp|cnn]   (root: network namespaces)
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "pod_runtimes.h"
#include "test_cluster.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct StepEvent {
  double ts = 0;
  int64_t generation = 0;
  int64_t step = 0;
};

// The step events rank 0 of every generation prints, read as the pods' logs grow.
class StepLog {
 public:
  explicit StepLog(std::string dir) : dir_(std::move(dir)) {}
  const std::vector<StepEvent>& Read() {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
      if (entry.path().extension() != ".log") continue;
      std::ifstream in(entry.path());
      size_t& offset = offsets_[entry.path().string()];
      in.seekg(static_cast<std::streamoff>(offset));
      std::string line;
      while (std::getline(in, line)) {
        if (in.eof()) break;  // a line still being written
        offset += line.size() + 1;
        if (line.find("\"event\":\"step\"") == std::string::npos) continue;
        const json j = json::parse(line, nullptr, false);
        if (j.is_object())
          events_.push_back(
              {j.value("ts", 0.0), j.value("generation", int64_t{0}), j.value("step", int64_t{0})});
      }
    }
    std::sort(events_.begin(), events_.end(),
              [](const StepEvent& a, const StepEvent& b) { return a.ts < b.ts; });
    return events_;
  }
  // The first step event of a generation above `generation`, once there is one.
  std::optional<StepEvent> FirstAfter(int64_t generation) {
    for (const StepEvent& e : Read()) {
      if (e.generation > generation) return e;
    }
    return std::nullopt;
  }
  // The median time between consecutive steps of `generation`.
  double StepSeconds(int64_t generation) {
    std::vector<double> gaps;
    const StepEvent* last = nullptr;
    for (const StepEvent& e : Read()) {
      if (e.generation != generation) continue;
      if (last != nullptr) gaps.push_back(e.ts - last->ts);
      last = &e;
    }
    if (gaps.empty()) return 0;
    std::sort(gaps.begin(), gaps.end());
    return gaps[gaps.size() / 2];
  }
  // The newest step completed before `ts`.
  int64_t LastStepBefore(double ts) {
    int64_t step = 0;
    for (const StepEvent& e : Read()) {
      if (e.ts < ts) step = std::max(step, e.step);
    }
    return step;
  }

 private:
  std::string dir_;
  std::map<std::string, size_t> offsets_;
  std::vector<StepEvent> events_;
};

struct Summary {
  std::vector<double> seconds, steps;  // the latency, and it in step times
  void Add(double s, double stepSeconds) {
    seconds.push_back(s);
    steps.push_back(stepSeconds > 0 ? s / stepSeconds : 0);
  }
  // `goal` <= 0: a figure without a goal.
  void Print(const char* name, double goal) {
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0 : v[v.size() / 2];
    };
    const double max = seconds.empty() ? 0 : *std::max_element(seconds.begin(), seconds.end());
    const double maxSteps = steps.empty() ? 0 : *std::max_element(steps.begin(), steps.end());
    std::printf(
        "{\"bench\":\"operator_latency\",\"summary\":\"%s\",\"n\":%zu,\"median_s\":%.4f,"
        "\"max_s\":%.4f,\"median_step_times\":%.1f,\"max_step_times\":%.1f,\"goal_s\":%s,"
        "\"met\":%s}\n",
        name, seconds.size(), median(seconds), max, median(steps), maxSteps,
        goal > 0 ? absl::StrFormat("%.3f", goal).c_str() : "null",
        goal > 0 ? (max < goal ? "true" : "false") : "null");
  }
};

int WorkersOn(TestCluster& c, const std::string& node) {
  int n = 0;
  for (const json& p : c.WorkerPods("j")) n += p["spec"].value("nodeName", "") == node;
  return n;
}

int64_t RunningGeneration(TestCluster& c) {
  const json st = c.JobStatus("j");
  return st.value("runningGeneration", 0) == st.value("generation", -1)
             ? st.value("runningGeneration", int64_t{0})
             : -1;
}

int Fail(const std::string& what, const TestCluster& c) {
  std::fprintf(stderr, "operator_latency_bench: %s (%s)\n", what.c_str(), c.dir().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  int rounds = 5;
  std::string model = "mlp";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc && absl::SimpleAtoi(argv[i + 1], &rounds) && rounds > 0) {
      ++i;
    } else if (a == "--model" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "mlp" || std::string(argv[i + 1]) == "cnn")) {
      model = argv[++i];
    } else {
      std::fprintf(stderr, "usage: operator_latency_bench [--rounds N>0] [--model mlp|cnn]\n");
      return 2;
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "operator_latency_bench: needs root (the pods' network namespaces)\n");
    return 2;
  }
  const std::string worker = WorkerBinary();
  if (worker.empty()) {
    std::fprintf(stderr, "operator_latency_bench: easyscale-worker is not built\n");
    return 2;
  }
  TestCluster c("operator-bench", {.isolatePods = true});
  if (Status s = c.StartApiServer(); !s.ok()) return Fail(s.ToString(), c);
  // Inference holds n1; the job runs on n2 and n3, and on all three between claims.
  if (Status s = c.AddNodes({{"n1", "h100", 2}, {"n2", "h100", 1}, {"n3", "h100", 1}}); !s.ok()) {
    return Fail(s.ToString(), c);
  }
  (void)c.client().Create(kPods, "default", InferencePod("inf-0", "n1", 2));
  OperatorProcess* op = c.StartWithRealWorkers("bench", worker);
  if (!Eventually([&] { return op->Ready(); }, 20s)) return Fail("the operator is not ready", c);
  const json spec = {
      {"image", "easyscale/worker:bench"},
      {"ests", 8},
      {"maxWorkers", 4},
      {"training", {{"model", model}, {"steps", 100000000}, {"checkpointEvery", 0}}}};
  (void)c.client().Create(kEasyScaleJobs, "default", EasyScaleJob("j", spec));
  StepLog log(c.dir());
  if (!Eventually([&] { return c.JobStatus("j").value("step", 0) > 20; }, 60s)) {
    return Fail("the job does not train", c);
  }
  std::printf(
      "{\"bench\":\"operator_latency\",\"cluster\":\"isolated pods, 3 nodes\","
      "\"workers\":\"easyscale-worker k8s\",\"model\":\"%s\",\"ests\":8}\n",
      model.c_str());

  Summary scaleOut, preemption, crash;
  int64_t redoneMax = 0;
  for (int r = 1; r <= rounds; ++r) {
    // Scale-out: inference leaves n1.
    const int64_t before = RunningGeneration(c);
    double start = Now();
    (void)c.client().Delete(kPods, "default", "inf-" + std::to_string(r - 1));
    std::optional<StepEvent> first;
    if (!Eventually([&] { return (first = log.FirstAfter(before)).has_value(); }, 60s)) {
      return Fail("no step after the release", c);
    }
    const double scaleOutSeconds = first->ts - start;
    if (!Eventually([&] { return RunningGeneration(c) > before; }, 30s)) {
      return Fail("the scaled-out generation does not run", c);
    }
    std::this_thread::sleep_for(1s);
    const double stepSeconds = log.StepSeconds(first->generation);
    scaleOut.Add(scaleOutSeconds, stepSeconds);

    // Preemption: inference wants n1's GPUs back.
    start = Now();
    (void)c.client().Create(kPods, "default", InferencePod("inf-" + std::to_string(r), "n1", 2));
    if (!Eventually([&] { return WorkersOn(c, "n1") == 0; }, 60s)) {
      return Fail("n1's GPUs are not freed", c);
    }
    preemption.Add(Now() - start, stepSeconds);
    if (!Eventually([&] { return RunningGeneration(c) > first->generation; }, 30s)) {
      return Fail("no generation runs after the preemption", c);
    }
    std::this_thread::sleep_for(1s);

    // Crash: a worker is SIGKILLed mid-step.
    const int64_t running = RunningGeneration(c);
    const json workers = c.JobStatus("j")["workers"];
    start = Now();
    c.SignalPod("default/" + workers.back()["pod"].get<std::string>(), SIGKILL);
    std::optional<StepEvent> resumed;
    if (!Eventually([&] { return (resumed = log.FirstAfter(running)).has_value(); }, 60s)) {
      return Fail("no step after the crash", c);
    }
    crash.Add(resumed->ts - start, stepSeconds);
    // Steps completed before the crash that were trained again (the one in
    // flight, never completed, is not among them).
    const int64_t redone = log.LastStepBefore(resumed->ts) + 1 - resumed->step;
    redoneMax = std::max(redoneMax, redone);
    std::printf(
        "{\"bench\":\"operator_latency\",\"round\":%d,\"step_s\":%.4f,\"scale_out_s\":%.4f,"
        "\"preemption_s\":%.4f,\"crash_recovery_s\":%.4f,\"steps_redone\":%lld}\n",
        r, stepSeconds, scaleOut.seconds.back(), preemption.seconds.back(), crash.seconds.back(),
        static_cast<long long>(redone));
    std::fflush(stdout);
    if (!Eventually([&] { return RunningGeneration(c) > running; }, 30s)) {
      return Fail("no generation runs after the crash", c);
    }
    std::this_thread::sleep_for(1s);
  }
  scaleOut.Print("scale_out_release_to_first_step", 0);
  std::vector<double> stepTimes;
  for (size_t i = 0; i < scaleOut.seconds.size(); ++i) {
    stepTimes.push_back(scaleOut.steps[i] > 0 ? scaleOut.seconds[i] / scaleOut.steps[i] : 0);
  }
  const double maxStep =
      stepTimes.empty() ? 0 : *std::max_element(stepTimes.begin(), stepTimes.end());
  preemption.Print("preemption_claim_to_gpu_freed", maxStep + 1.0);
  crash.Print("crash_sigkill_to_first_step", 2.0);
  std::printf(
      "{\"bench\":\"operator_latency\",\"summary\":\"crash_steps_redone\",\"max\":%lld,"
      "\"goal\":0,\"met\":%s}\n",
      static_cast<long long>(redoneMax), redoneMax <= 0 ? "true" : "false");
  return 0;
}

}  // namespace
}  // namespace easyscale::op::testing

int main(int argc, char** argv) { return easyscale::op::testing::Main(argc, argv); }
