// easyscale-sim: replays a cluster trace under several scheduling policies
// with the operator's scheduler and reports utilisation, job times,
// preemptions, inference wait and decision time. See --help.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/flags.h"
#include "easyscale/common/log.h"
#include "generator.h"
#include "paper_workload.h"
#include "report.h"
#include "simulator.h"
#include "trace.h"

namespace easyscale::sim {
namespace {

struct Flags {
  std::string trace = EASYSCALE_SIM_DEFAULT_TRACE;
  std::string paperWorkload, stepProfile = EASYSCALE_SIM_PAPER_PROFILE;
  bool generate = false, noSimulate = false, help = false;
  GeneratorOptions gen;
  int64_t seed = static_cast<int64_t>(
      GeneratorOptions().seed);  // FlagSet parses int64_t; gen.seed is unsigned
  std::string out, json, svg;
  std::string policyList = "easyscale,homogeneous,static";
  std::vector<Policy> policies;  // parsed from policyList
  SimOptions sim;
};

// The flag set over `f`; --help and ParseFlags() share it so the help text
// always lists exactly the flags that parse.
FlagSet MakeFlagSet(Flags& f) {
  FlagSet s(
      "easyscale-sim [flags]\n\n"
      "Replays a cluster trace under several scheduling policies. Without --trace or\n"
      "--generate the bundled default trace is used.");
  s.String("trace", &f.trace, "trace file to replay");
  s.String("paper-workload", &f.paperWorkload,
           "replay a workload in the EasyScale artifact's format (PAPER_WORKLOAD.md) on its "
           "cluster (32 v100, 16 p100, 16 t4) instead of a trace");
  s.String("step-profile", &f.stepProfile, "per-model, per-GPU step times for --paper-workload");
  s.Bool("generate", &f.generate, "generate a trace instead of reading one");
  s.Int("gpus", &f.gen.gpus, "generated cluster's GPUs", 1, 1000000);
  s.Int("jobs", &f.gen.jobs, "generated training jobs", 0, 1000000);
  s.Double("days", &f.gen.days, "generated trace's length in days", 0.01, 365);
  s.Int("seed", &f.seed, "generator seed", 0, 1000000000000000);
  s.Double("load", &f.gen.load, "offered training GPU-time / idle GPU-time", 0.01, 100);
  s.String("out", &f.out, "write the generated trace here (with --generate)");
  s.Bool("no-simulate", &f.noSimulate, "stop after reading or generating the trace");
  s.String("policies", &f.policyList, "comma-separated policies to replay");
  s.String("json", &f.json, "write the results as JSON here");
  s.String("svg", &f.svg, "write the utilisation plot here");
  s.Double("tick", &f.sim.tick, "re-schedule at most this often, in seconds", 1, 86400);
  s.Double("rescale-pause", &f.sim.rescalePause,
           "a (re)configured job makes no progress this long, in seconds", 0, 86400);
  s.Double("preempt-latency", &f.sim.preemptLatency,
           "a preempted worker frees its GPU after this many seconds", 0, 3600);
  return s;
}

std::string Usage() {
  Flags defaults;
  return MakeFlagSet(defaults).Help();
}

StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  FlagSet s = MakeFlagSet(f);
  ES_ASSIGN_OR_RETURN(std::vector<std::string> rest, s.Parse(argc, argv));
  f.help = s.help_requested();
  if (f.help) return f;
  if (!rest.empty()) return absl::InvalidArgumentError("unexpected argument '" + rest[0] + "'");
  f.gen.seed = static_cast<uint64_t>(f.seed);
  for (const std::string& name : std::vector<std::string>(absl::StrSplit(f.policyList, ','))) {
    ES_ASSIGN_OR_RETURN(Policy p, ParsePolicy(name));
    f.policies.push_back(p);
  }
  if (f.generate) ES_RETURN_IF_ERROR(ValidateGeneratorOptions(f.gen));
  if (!f.generate && !f.out.empty()) return absl::InvalidArgumentError("--out needs --generate");
  if (f.generate && !f.paperWorkload.empty()) {
    return absl::InvalidArgumentError("--generate and --paper-workload exclude each other");
  }
  return f;
}

int Main(int argc, char** argv) {
  StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "easyscale-sim: " << flags.status().message() << "\n";
    return 2;
  }
  if (flags->help) {
    std::cout << Usage();
    return 0;
  }
  Trace trace;
  if (flags->generate) {
    trace = GenerateTrace(flags->gen);
    if (!flags->out.empty()) {
      if (Status s = WriteFileAtomic(flags->out, FormatTrace(trace)); !s.ok()) {
        std::cerr << "easyscale-sim: " << s.message() << "\n";
        return 1;
      }
      LogInfo("sim", "trace written", {{"path", flags->out}, {"jobs", trace.jobs.size()}});
    }
  } else if (!flags->paperWorkload.empty()) {
    StatusOr<StepProfile> profile = ReadStepProfileFile(flags->stepProfile);
    StatusOr<Trace> t = profile.ok()
                            ? ReadPaperWorkloadFile(flags->paperWorkload, *profile, PaperCluster{})
                            : StatusOr<Trace>(profile.status());
    if (!t.ok()) {
      std::cerr << "easyscale-sim: " << t.status().message() << "\n";
      return 1;
    }
    trace = std::move(*t);
  } else {
    StatusOr<Trace> t = ReadTraceFile(flags->trace);
    if (!t.ok()) {
      std::cerr << "easyscale-sim: " << t.status().message() << "\n";
      return 1;
    }
    trace = std::move(*t);
  }
  if (flags->noSimulate) return 0;

  // Policies are independent replays of the same trace: one thread each.
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<PolicyResult> results(flags->policies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < flags->policies.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = Simulate(trace, flags->policies[i], flags->sim); });
  }
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("trace: %d GPUs on %zu nodes, %zu jobs, %.1f days; simulated in %.1f s\n",
              trace.TotalGpus(), trace.nodes.size(), trace.jobs.size(), trace.horizon / 86400.0,
              seconds);
  std::fputs(FormatTable(results).c_str(), stdout);
  std::fputs(FormatJobTable(results).c_str(), stdout);
  // The ratios the EasyScale paper reports on its workload (plot/jct_makespan.csv).
  auto meanJct = [&](Policy p) {
    for (const PolicyResult& r : results) {
      if (r.policy == p && r.jobsCompleted == r.jobsSubmitted) return r.completionSeconds.mean;
    }
    return std::numeric_limits<double>::quiet_NaN();
  };
  const double heterogeneous = meanJct(Policy::kEasyScale);
  for (auto [p, paper] : {std::pair{Policy::kYarnCs, 13.2}, {Policy::kHomogeneous, 1.58}}) {
    const double ratio = meanJct(p) / heterogeneous;
    if (std::isfinite(ratio)) {
      std::printf("mean JCT of %s / easyscale: %.2fx (paper: %s / heterogeneous %.2fx)\n",
                  PolicyName(p), ratio, p == Policy::kYarnCs ? "YARN-CS" : "homogeneous", paper);
    }
  }
  for (Policy p : {Policy::kEasyScale, Policy::kHomogeneous}) {
    const double g = UtilisationGainOverStatic(results, p);
    if (std::isfinite(g)) {
      std::printf("utilisation gain of %s over static: %+.1f%% (paper, production: +62.1%%)\n",
                  PolicyName(p), g);
    }
  }
  // The production baseline of the paper: training never touches the GPUs
  // inference leaves idle, so the cluster is only as busy as inference.
  for (const PolicyResult& r : results) {
    if (r.policy == Policy::kEasyScale && r.inferenceShare > 0.0) {
      std::printf("utilisation gain of easyscale over inference-only GPUs: %+.1f%%\n",
                  100.0 * (r.utilisation - r.inferenceShare) / r.inferenceShare);
    }
  }
  nlohmann::json j = ToJson(results, trace, flags->sim);
  j["wallSeconds"] = seconds;
  if (!flags->json.empty()) {
    if (Status s = WriteFileAtomic(flags->json, j.dump(1) + "\n"); !s.ok()) {
      std::cerr << "easyscale-sim: " << s.message() << "\n";
      return 1;
    }
  }
  if (!flags->svg.empty()) {
    const std::string title =
        absl::StrCat("GPU utilisation: ", trace.TotalGpus(), " GPUs, ", trace.jobs.size(), " jobs");
    if (Status s = WriteFileAtomic(flags->svg, RenderSvg(results, title)); !s.ok()) {
      std::cerr << "easyscale-sim: " << s.message() << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace easyscale::sim

int main(int argc, char** argv) { return easyscale::sim::Main(argc, argv); }
