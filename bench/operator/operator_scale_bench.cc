// operator_scale_bench: the operator at cluster scale, in the test API server.
// N EasyScaleJobs (20 ESTs, up to 10 workers each) on N * 10 GPUs (8 a100s a
// node), so the cluster is full once every job runs; the easyscale-operator
// process as the chart runs it (its default 2 s resync). The bench plays the
// kubelet (worker pods become Running; deletions complete at once) and the
// workers: each worker of a released generation reports its step every
// --report-seconds, and a worker asked to drain reports its checkpoint at
// once. No training runs. It measures:
//   steady state: the operator's CPU seconds (utime + stime, /proc) per minute
//                 once every job runs, over --steady-seconds;
//   preemption:   an inference pod claims a GPU on a full node -> the job
//                 holding it has the preemption in its status (ordered: the
//                 plan with the worker to drain is written and published);
//   release:      that inference pod goes -> a worker pod is created on the
//                 freed GPU's node;
// each over --trials nodes, as median and p99 (the slowest of fewer than 100).
// Each latency is split into what the bench observes on the way, every time
// from the trial's start (the claim's create, the release's delete):
//   preemption:   the API server acknowledged the claim (claimAcked);
//   release:      the job that gets the GPU has its new generation in the
//                 status, workers draining (plan); the stand-in workers'
//                 checkpoint reports of the old generation were accepted by
//                 the operator's control server (checkpoint: the bench's own
//                 share, a real worker's checkpoint time in a cluster); the
//                 pod (pod); the new generation released (running, if seen
//                 before the trial ends).
// The operator's /metrics before and after the trials give its work queue's
// wait and work, its reconciles and scheduling cycles during them, and /proc
// the CPU the operator and the bench used during them.
//   operator_scale_bench [--jobs 100] [--trials 10] [--steady-seconds 20]
//                        [--report-seconds 10]
// EASYSCALE_OPERATOR_BIN runs another build's operator (for a before/after).
// Prints one JSON line of results.
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

#include "controller/cluster_objects.h"
#include "controller/control_token.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/control_protocol.h"
#include "easyscale/common/flags.h"
#include "easyscale/operator/informer.h"
#include "easyscale/operator/work_queue.h"
#include "prometheus_text.h"
#include "test_cluster.h"
#include "testing/test_util.h"

namespace easyscale::op::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kGpusPerNode = 8;
constexpr int kWorkersPerJob = 10;

struct BenchOptions {
  int jobs = 100;
  int trials = 10;
  double steadySeconds = 20;
  double reportSeconds = 10;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The process's CPU time so far (user + system), from /proc/<pid>/stat.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "(comm) "
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i >= 14) ticks += std::stod(f);  // utime (14), stime (15)
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A pooled keep-alive connection the server has closed fails once: try again.
const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const StatusOr<T>& s) {
  return s.status();
}

template <typename Call>
auto WithRetries(Call call) {
  auto result = call();
  for (int i = 0; i < 10 && absl::IsUnavailable(StatusOf(result)); ++i) result = call();
  return result;
}

// Polls `cond` every 50 ms (the checks list every pod) until it holds or `limit` passes.
bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!cond()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

double Quantile(std::vector<double> v, double q) {
  std::erase_if(v, [](double x) { return std::isnan(x); });
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - 1)];
}

// The operator's /metrics (empty if it does not answer).
std::string ScrapeMetrics(const OperatorProcess& op) {
  httplib::Client c("127.0.0.1", op.metricsPort);
  c.set_read_timeout(30, 0);
  httplib::Result res = c.Get("/metrics");
  return res && res->status == 200 ? res->body : std::string();
}

// The kubelet and the workers of every job, played from informers.
class StandIns {
 public:
  StandIns(KubeClient* client, const OperatorProcess* op, double reportSeconds)
      : client_(client),
        jobs_(client, kEasyScaleJobs, {.ns = "default"}),
        pods_(client, kPods, {.ns = "default"}),
        controlPort_(op->controlPort),
        reportEvery_(reportSeconds) {
    auto onPod = [this](const json& p) {
      const PodView v = ParsePod(p);
      if (v.role == PodRole::kWorker && !v.deleting && v.phase == PodPhase::kPending) {
        std::lock_guard<std::mutex> lock(mu_);
        added_.push_back({v.node, v.JobKey(), Clock::now()});
      }
      kubelet_.Add(v.key);
    };
    pods_.AddHandlers(
        {.onAdd = onPod, .onUpdate = [onPod](const json&, const json& p) { onPod(p); }});
    jobs_.AddHandlers({.onUpdate = [this](const json& old, const json& now) {
      auto field = [](const json& j, const char* name) {
        return j.value("status", json::object()).value(name, int64_t{0});
      };
      const auto at = Clock::now();
      std::lock_guard<std::mutex> lock(mu_);
      if (field(now, "preemptions") > field(old, "preemptions")) {
        preempted_.push_back({ObjectKey(now), at});
      }
      if (field(now, "generation") != field(old, "generation") ||
          field(now, "runningGeneration") != field(old, "runningGeneration")) {
        generations_[ObjectKey(now)].push_back(
            {at, field(now, "generation"), field(now, "runningGeneration")});
      }
    }});
  }

  ~StandIns() {
    stopped_ = true;
    kubelet_.ShutDown();
    for (std::thread& t : threads_) t.join();
    jobs_.Stop();
    pods_.Stop();
  }

  void Start(const ControlTokens& tokens) {
    tokens_ = tokens;
    jobs_.Start();
    pods_.Start();
    for (int i = 0; i < 4; ++i) threads_.emplace_back([this] { KubeletLoop(); });
    threads_.emplace_back([this] { DrainLoop(); });
    threads_.emplace_back([this] { StepLoop(); });
  }

  // Jobs whose newest generation runs with all its workers, and Running worker pods.
  std::pair<int, int> Settled() const {
    int jobs = 0;
    for (const json& j : jobs_.List()) {
      const JobView v = ParseJob(j);
      if (v.status.ok() && v.status->workers.size() == kWorkersPerJob &&
          v.status->runningGeneration == v.status->generation && v.status->draining.empty()) {
        ++jobs;
      }
    }
    int pods = 0;
    for (const json& p : pods_.List()) {
      const PodView v = ParsePod(p);
      if (v.role == PodRole::kWorker && !v.deleting && v.phase == PodPhase::kRunning) ++pods;
    }
    return {jobs, pods};
  }
  int LiveWorkersOn(const std::string& node) const {
    int n = 0;
    for (const json& p : pods_.List()) {
      const PodView v = ParsePod(p);
      if (v.role == PodRole::kWorker && !v.Terminated() && v.node == node) ++n;
    }
    return n;
  }
  // The node's pods and their jobs' generations, for a trial that stalls.
  std::string Describe(const std::string& node) const {
    std::string out;
    std::set<std::string> jobs;
    for (const json& p : pods_.List()) {
      const PodView v = ParsePod(p);
      if (v.node != node) continue;
      out += v.name + (v.deleting ? " (deleting)" : "") + "; ";
      if (v.role == PodRole::kWorker) jobs.insert(v.JobKey());
    }
    for (const std::string& key : jobs) {
      const std::optional<json> j = jobs_.Get(key);
      if (j) out += "\n" + key + ": " + j->value("status", json::object()).dump();
    }
    return out;
  }
  // The first worker pod created on `node` after `since`: when, and its job.
  std::optional<std::pair<Clock::time_point, std::string>> PodAddedOn(const std::string& node,
                                                                      Clock::time_point since) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const PodAdded& a : added_) {
      if (a.node == node && a.at >= since) return std::make_pair(a.at, a.job);
    }
    return std::nullopt;
  }
  // The first status of `job` after `since` with a newer generation: when,
  // and that generation.
  std::optional<std::pair<Clock::time_point, int64_t>> PlannedAfter(const std::string& job,
                                                                    Clock::time_point since) {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t before = 0;
    for (const GenerationSeen& g : generations_[job]) {
      if (g.at < since) {
        before = g.generation;
      } else if (g.generation > before) {
        return std::make_pair(g.at, g.generation);
      }
    }
    return std::nullopt;
  }
  // The first status of `job` that runs `generation` (or a newer one).
  std::optional<Clock::time_point> RunningAfter(const std::string& job, int64_t generation) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const GenerationSeen& g : generations_[job]) {
      if (g.running >= generation) return g.at;
    }
    return std::nullopt;
  }
  // The first DrainLoop pass after `since` in which the operator accepted
  // checkpoint reports of `job`: when it accepted the last of that pass.
  std::optional<Clock::time_point> CheckpointAfter(const std::string& job,
                                                   Clock::time_point since) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Clock::time_point t : checkpointed_[job]) {
      if (t >= since) return t;
    }
    return std::nullopt;
  }
  // The first preemption after `since` of one of `jobs`.
  std::optional<Clock::time_point> PreemptionAfter(Clock::time_point since,
                                                   const std::set<std::string>& jobs) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [job, t] : preempted_) {
      if (t >= since && jobs.count(job) != 0) return t;
    }
    return std::nullopt;
  }
  // The jobs with live workers on `node`.
  std::set<std::string> JobsOn(const std::string& node) const {
    std::set<std::string> out;
    for (const json& p : pods_.List()) {
      const PodView v = ParsePod(p);
      if (v.role == PodRole::kWorker && !v.Terminated() && v.node == node) out.insert(v.JobKey());
    }
    return out;
  }

 private:
  // Pending worker pods start; pods being deleted are gone at once.
  void KubeletLoop() {
    while (std::optional<std::string> key = kubelet_.Get()) {
      const std::optional<json> pod = pods_.Get(*key);
      if (pod) {
        const PodView v = ParsePod(*pod);
        if (v.deleting) {
          (void)WithRetries([&] { return client_->Delete(kPods, v.ns, v.name, 0); });
        } else if (v.role == PodRole::kWorker && v.phase == PodPhase::kPending) {
          (void)WithRetries([&] {
            return client_->MergePatch(kPods, v.ns, v.name, {{"status", {{"phase", "Running"}}}},
                                       true);
          });
        }
      }
      kubelet_.Done(*key);
    }
  }

  // True once the operator took the report (a closed keep-alive connection
  // fails once; the next attempt reconnects).
  static bool Report(httplib::Client& control, const std::string& token, const WorkerReport& r) {
    httplib::Headers h = {{kAuthorizationHeader, BearerToken(token)}};
    for (int attempt = 0; attempt < 3; ++attempt) {
      httplib::Result res = control.Post("/v1/report", h, ToJson(r).dump(), "application/json");
      if (res) return res->status / 100 == 2;
    }
    return false;
  }

  // A worker asked to drain checkpoints at once: its own thread, so that the
  // step reports of a thousand jobs never hold it up.
  void DrainLoop() {
    httplib::Client control = Control();
    std::set<std::string> drained;  // pod@generation the operator took
    while (!stopped_) {
      std::this_thread::sleep_for(50ms);
      const int64_t step = Step();
      for (const json& j : jobs_.List()) {
        const JobView job = ParseJob(j);
        if (!job.status.ok()) continue;
        std::optional<Clock::time_point> accepted;
        for (const DrainingRecord& d : job.status->draining) {
          const std::string key = d.worker.pod + "@" + std::to_string(d.generation);
          if (drained.count(key) != 0) continue;
          if (Report(control, tokens_->TokenFor(job.uid),
                     {.job = job.key,
                      .pod = d.worker.pod,
                      .generation = d.generation,
                      .state = WorkerState::kCheckpointed,
                      .step = step,
                      .stateStep = step,
                      .stateUrl = "http://" + d.worker.pod + ":29400"})) {
            drained.insert(key);
            accepted = Clock::now();
          }
        }
        if (accepted) {
          std::lock_guard<std::mutex> lock(mu_);
          checkpointed_[job.key].push_back(*accepted);
        }
      }
    }
  }

  // Every worker of a released generation reports its step every reportEvery_.
  void StepLoop() {
    httplib::Client control = Control();
    std::map<std::string, Clock::time_point> last;  // job -> its last reports
    while (!stopped_) {
      std::this_thread::sleep_for(200ms);
      for (const json& j : jobs_.List()) {
        const JobView job = ParseJob(j);
        if (!job.status.ok() || stopped_) continue;
        const JobStatus& st = *job.status;
        Clock::time_point& sent = last[job.key];
        if (st.runningGeneration != st.generation || st.workers.empty() ||
            Clock::now() - sent < std::chrono::duration<double>(reportEvery_)) {
          continue;
        }
        sent = Clock::now();
        for (const WorkerRecord& w : st.workers) {
          (void)Report(control, tokens_->TokenFor(job.uid),
                       {.job = job.key,
                        .pod = w.pod,
                        .generation = st.generation,
                        .rank = w.rank,
                        .state = WorkerState::kRunning,
                        .step = Step(),
                        .samplesPerSecond = 10.0});
        }
      }
    }
  }

  httplib::Client Control() const {
    httplib::Client c("127.0.0.1", controlPort_);
    c.set_keep_alive(true);
    c.set_read_timeout(5, 0);
    return c;
  }
  int64_t Step() const { return static_cast<int64_t>(Seconds(Clock::now() - start_)); }

  KubeClient* client_;
  Informer jobs_;
  Informer pods_;
  WorkQueue kubelet_;
  int controlPort_;
  double reportEvery_;
  const Clock::time_point start_ = Clock::now();
  std::optional<ControlTokens> tokens_;
  std::atomic<bool> stopped_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  struct PodAdded {
    std::string node;
    std::string job;
    Clock::time_point at;
  };
  struct GenerationSeen {
    Clock::time_point at;
    int64_t generation;
    int64_t running;
  };
  std::vector<PodAdded> added_;
  std::vector<std::pair<std::string, Clock::time_point>> preempted_;    // job, when
  std::map<std::string, std::vector<GenerationSeen>> generations_;      // by job
  std::map<std::string, std::vector<Clock::time_point>> checkpointed_;  // by job
};

int Run(const BenchOptions& o) {
  const int nodes = (o.jobs * kWorkersPerJob + kGpusPerNode - 1) / kGpusPerNode;
  TestCluster cluster("scale-bench");
  ES_CHECK(cluster.StartApiServer().ok());
  std::vector<NodeSpec> specs;
  for (int i = 0; i < nodes; ++i) specs.push_back({"n" + std::to_string(i), "a100", kGpusPerNode});
  ES_CHECK(cluster.AddNodes(specs).ok());
  // The chart's defaults (2 s resync); the cluster's other flags as tests run it.
  OperatorProcess* op = cluster.StartOperator("op", {"--resync", "2", "--log-level", "warn"});
  ES_CHECK(Eventually([&] { return op->Ready(); }, 60s)) << "the operator did not get ready";
  StatusOr<ControlTokens> tokens =
      ControlTokens::FromSecret(cluster.client(), "default", "easyscale-control-key");
  ES_CHECK(tokens.ok()) << tokens.status();

  StandIns standIns(&cluster.client(), op, o.reportSeconds);
  standIns.Start(*tokens);
  const auto created = Clock::now();
  for (int i = 0; i < o.jobs; ++i) {
    const json spec = {{"image", "easyscale/worker:bench"},
                       {"ests", 2 * kWorkersPerJob},
                       {"minWorkers", 1},
                       {"maxWorkers", kWorkersPerJob}};
    ES_CHECK(WithRetries([&] {
               return cluster.client().Create(kEasyScaleJobs, "default",
                                              EasyScaleJob("job-" + std::to_string(i), spec));
             }).ok());
  }
  auto allSettled = [&] {
    const auto [jobs, pods] = standIns.Settled();
    return jobs == o.jobs && pods == o.jobs * kWorkersPerJob;
  };
  const bool settled = WaitFor(allSettled, std::chrono::seconds(60 + o.jobs / 2));
  const double setupSeconds = Seconds(Clock::now() - created);
  const auto [settledJobs, runningPods] = standIns.Settled();
  std::fprintf(stderr, "setup: %d/%d jobs settled, %d worker pods running, %.1f s\n", settledJobs,
               o.jobs, runningPods, setupSeconds);
  if (!settled) return 1;

  std::this_thread::sleep_for(std::chrono::duration<double>(o.reportSeconds));  // reports flow
  const pid_t pid = op->process->pid();
  const double cpu0 = CpuSeconds(pid);
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.steadySeconds));
  const double cores = (CpuSeconds(pid) - cpu0) / Seconds(Clock::now() - t0);
  // Before the trials, which stop the bench if one stalls.
  std::fprintf(stderr, "steady state: operator %.4f cores (%.2f CPU s/min) over %.0f s\n", cores,
               cores * 60, o.steadySeconds);

  // Each trial's latencies and their segments, in seconds from its start.
  std::map<std::string, std::vector<double>> series;
  auto since = [](Clock::time_point start, std::optional<Clock::time_point> t) {
    return t ? Seconds(*t - start) : NAN;
  };
  const std::string metrics0 = ScrapeMetrics(*op);
  const double opCpu0 = CpuSeconds(pid), benchCpu0 = CpuSeconds(getpid());
  const auto trials0 = Clock::now();
  for (int i = 0; i < o.trials; ++i) {
    const std::string node = "n" + std::to_string((i * 7919) % nodes);
    const std::string inference = "inference-" + std::to_string(i);
    // A full cluster: the claim has no idle GPU to take. At 1,000 jobs the
    // last trial's rescales may still ripple through a few jobs elsewhere: the
    // trial needs its own node full, and says how many jobs were unsettled.
    if (!WaitFor(allSettled, 120s)) {
      const auto [jobs, pods] = standIns.Settled();
      std::fprintf(stderr, "trial %d: %d of %d jobs settled, %d worker pods running\n", i, jobs,
                   o.jobs, pods);
    }
    ES_CHECK(WaitFor([&] { return standIns.LiveWorkersOn(node) == kGpusPerNode; }, 60s))
        << node << " is not full";
    const std::set<std::string> jobsOnNode = standIns.JobsOn(node);
    auto start = Clock::now();
    const StatusOr<json> claimed = WithRetries([&] {
      return cluster.client().Create(kPods, "default", InferencePod(inference, node, 1));
    });
    ES_CHECK(claimed.ok()) << claimed.status();
    series["claimAcked"].push_back(Seconds(Clock::now() - start));
    ES_CHECK(
        Eventually([&] { return standIns.PreemptionAfter(start, jobsOnNode).has_value(); }, 30s))
        << "no preemption for " << inference << " on " << node;
    series["preemption"].push_back(Seconds(*standIns.PreemptionAfter(start, jobsOnNode) - start));
    ES_CHECK(WaitFor([&] { return standIns.LiveWorkersOn(node) == kGpusPerNode - 1; }, 30s))
        << "the preempted worker did not leave " << node << ": " << standIns.Describe(node);

    start = Clock::now();
    const Status released =
        WithRetries([&] { return cluster.client().Delete(kPods, "default", inference, 0); });
    ES_CHECK(released.ok()) << released;
    series["deleteAcked"].push_back(Seconds(Clock::now() - start));
    ES_CHECK(Eventually([&] { return standIns.PodAddedOn(node, start).has_value(); }, 30s))
        << "no worker pod took the GPU " << inference << " released on " << node;
    const auto [podAt, job] = *standIns.PodAddedOn(node, start);
    series["release"].push_back(Seconds(podAt - start));
    ES_CHECK(WaitFor([&] { return standIns.LiveWorkersOn(node) == kGpusPerNode; }, 30s))
        << "the released GPU on " << node << " was not used: " << standIns.Describe(node);
    // The checkpoint and the release that follow the plan (not those of a
    // change the job was still finishing when the trial started).
    const auto planned = standIns.PlannedAfter(job, start);
    const std::optional<Clock::time_point> plannedAt =
        planned ? std::optional<Clock::time_point>(planned->first) : std::nullopt;
    series["releasePlan"].push_back(since(start, plannedAt));
    series["releaseCheckpoint"].push_back(
        planned ? since(start, standIns.CheckpointAfter(job, planned->first)) : NAN);
    if (planned) {  // not part of the latency: waited for here only to time it
      (void)Eventually([&] { return standIns.RunningAfter(job, planned->second).has_value(); },
                       10s);
    }
    series["releaseRunning"].push_back(
        planned ? since(start, standIns.RunningAfter(job, planned->second)) : NAN);
    std::fprintf(stderr,
                 "trial %d on %s: preemption %.3f s (claim acked %.3f), release -> pod %.3f s "
                 "(%s: delete acked %.3f, plan %.3f, checkpoint %.3f, running %.3f)\n",
                 i, node.c_str(), series["preemption"].back(), series["claimAcked"].back(),
                 series["release"].back(), job.c_str(), series["deleteAcked"].back(),
                 series["releasePlan"].back(), series["releaseCheckpoint"].back(),
                 series["releaseRunning"].back());
  }
  const double trialSeconds = Seconds(Clock::now() - trials0);
  const double opCores = (CpuSeconds(pid) - opCpu0) / trialSeconds;
  const double benchCores = (CpuSeconds(getpid()) - benchCpu0) / trialSeconds;
  const std::string metrics1 = ScrapeMetrics(*op);

  json result = {{"jobs", o.jobs},
                 {"nodes", nodes},
                 {"gpus", nodes * kGpusPerNode},
                 {"setupSeconds", setupSeconds},
                 {"steadySeconds", o.steadySeconds},
                 {"reportSeconds", o.reportSeconds},
                 {"operatorCores", cores},
                 {"operatorCpuSecondsPerMinute", cores * 60},
                 {"trials", o.trials},
                 {"trialSeconds", trialSeconds},
                 {"trialsOperatorCores", opCores},
                 {"trialsBenchCores", benchCores}};
  for (const auto& [name, v] : series) {
    result[name + "MedianS"] = Quantile(v, 0.5);
    result[name + "P99S"] = Quantile(v, 0.99);
  }
  // What the operator's metrics saw during the trials: count, mean and the
  // bucket bound of the p99.
  for (const char* name :
       {"workqueue_queue_duration_seconds", "workqueue_work_duration_seconds",
        "easyscale_reconcile_duration_seconds", "easyscale_schedule_duration_seconds"}) {
    const Histogram h = ReadHistogram(metrics1, name).Minus(ReadHistogram(metrics0, name));
    result["metrics"][name] = {
        {"count", h.count}, {"meanS", h.Mean()}, {"p99BoundS", h.QuantileBound(0.99)}};
  }
  result["metrics"]["workqueue_adds_total"] =
      ReadSum(metrics1, "workqueue_adds_total") - ReadSum(metrics0, "workqueue_adds_total");
  std::printf("%s\n", result.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace easyscale::op::testing

int main(int argc, char** argv) {
  easyscale::op::testing::BenchOptions o;
  easyscale::FlagSet flags("operator_scale_bench");
  flags.Int("jobs", &o.jobs, "EasyScaleJobs (10 GPUs each; 8-GPU nodes for all of them)");
  flags.Int("trials", &o.trials, "preemption and release trials, each on its own node");
  flags.Double("steady-seconds", &o.steadySeconds, "how long the operator's CPU is measured");
  flags.Double("report-seconds", &o.reportSeconds, "how often each stand-in worker reports");
  auto rest = flags.Parse(argc, argv, 1);
  if (!rest.ok() || !rest->empty()) {
    std::fprintf(stderr, "%s\n%s",
                 rest.ok() ? "unexpected argument" : rest.status().ToString().c_str(),
                 flags.Help().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  return easyscale::op::testing::Run(o);
}
