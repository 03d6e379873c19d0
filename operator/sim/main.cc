// easyscale-sim: replays a cluster trace under several scheduling policies
// with the operator's scheduler and reports utilisation, job times,
// preemptions, inference wait and decision time. See --help.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/log.h"
#include "generator.h"
#include "report.h"
#include "simulator.h"
#include "trace.h"

namespace easyscale::sim {
namespace {

constexpr const char* kUsage =
    "usage: easyscale-sim [--trace FILE] [--generate --gpus N --jobs M --days D --seed K\n"
    "                      [--load L] [--out FILE] [--no-simulate]]\n"
    "                     [--policies easyscale,homogeneous,static] [--json OUT] [--svg OUT]\n"
    "                     [--tick S] [--rescale-pause S] [--preempt-latency S]\n"
    "Without --trace or --generate the bundled default trace is used.\n";

struct Flags {
  std::string trace = EASYSCALE_SIM_DEFAULT_TRACE;
  bool generate = false, simulate = true;
  GeneratorOptions gen;
  std::string out, json, svg;
  std::vector<Policy> policies = {Policy::kEasyScale, Policy::kHomogeneous, Policy::kStatic};
  SimOptions sim;
};

Status ParseNumber(const std::string& flag, const std::string& text, double lo, double hi,
                   double* out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " must be a number in [", lo, ", ", hi, "], got '", text, "'"));
  }
  *out = v;
  return absl::OkStatus();
}

StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> StatusOr<std::string> {
      if (i + 1 >= argc) return absl::InvalidArgumentError(a + " needs a value");
      return std::string(argv[++i]);
    };
    auto number = [&](double lo, double hi, double* out) -> Status {
      ES_ASSIGN_OR_RETURN(std::string v, value());
      return ParseNumber(a, v, lo, hi, out);
    };
    double n = 0.0;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a == "--trace") {
      ES_ASSIGN_OR_RETURN(f.trace, value());
    } else if (a == "--generate") {
      f.generate = true;
    } else if (a == "--no-simulate") {
      f.simulate = false;
    } else if (a == "--gpus") {
      ES_RETURN_IF_ERROR(number(1, 1000000, &n));
      f.gen.gpus = static_cast<int>(n);
    } else if (a == "--jobs") {
      ES_RETURN_IF_ERROR(number(0, 1000000, &n));
      f.gen.jobs = static_cast<int>(n);
    } else if (a == "--days") {
      ES_RETURN_IF_ERROR(number(0.01, 365, &f.gen.days));
    } else if (a == "--seed") {
      ES_RETURN_IF_ERROR(number(0, 1e15, &n));
      f.gen.seed = static_cast<uint64_t>(n);
    } else if (a == "--load") {
      ES_RETURN_IF_ERROR(number(0.01, 100, &f.gen.load));
    } else if (a == "--out") {
      ES_ASSIGN_OR_RETURN(f.out, value());
    } else if (a == "--json") {
      ES_ASSIGN_OR_RETURN(f.json, value());
    } else if (a == "--svg") {
      ES_ASSIGN_OR_RETURN(f.svg, value());
    } else if (a == "--tick") {
      ES_RETURN_IF_ERROR(number(1, 86400, &f.sim.tick));
    } else if (a == "--rescale-pause") {
      ES_RETURN_IF_ERROR(number(0, 86400, &f.sim.rescalePause));
    } else if (a == "--preempt-latency") {
      ES_RETURN_IF_ERROR(number(0, 3600, &f.sim.preemptLatency));
    } else if (a == "--policies") {
      ES_ASSIGN_OR_RETURN(std::string list, value());
      f.policies.clear();
      for (const std::string& name : std::vector<std::string>(absl::StrSplit(list, ','))) {
        ES_ASSIGN_OR_RETURN(Policy p, ParsePolicy(name));
        f.policies.push_back(p);
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", a, "'\n", kUsage));
    }
  }
  if (f.generate) ES_RETURN_IF_ERROR(ValidateGeneratorOptions(f.gen));
  if (!f.generate && !f.out.empty()) return absl::InvalidArgumentError("--out needs --generate");
  return f;
}

int Main(int argc, char** argv) {
  StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::cerr << "easyscale-sim: " << flags.status().message() << "\n";
    return 2;
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
  } else {
    StatusOr<Trace> t = ReadTraceFile(flags->trace);
    if (!t.ok()) {
      std::cerr << "easyscale-sim: " << t.status().message() << "\n";
      return 1;
    }
    trace = std::move(*t);
  }
  if (!flags->simulate) return 0;

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
