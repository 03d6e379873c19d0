#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace easyscale::sim {
namespace {

const PolicyResult* Find(const std::vector<PolicyResult>& results, Policy p) {
  for (const PolicyResult& r : results) {
    if (r.policy == p) return &r;
  }
  return nullptr;
}

nlohmann::json SummaryJson(const Summary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"p50", s.p50}, {"p95", s.p95}};
}

nlohmann::json GpuTimeJson(const GpuTime& g) {
  return {{"allocated", g.allocated},
          {"useful", g.useful},
          {"idleInStep", g.idleInStep},
          {"paused", g.paused}};
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Hours(double seconds) { return Fixed(seconds / 3600.0, 2) + "h"; }

}  // namespace

double UtilisationGainOverStatic(const std::vector<PolicyResult>& results, Policy policy) {
  const PolicyResult* s = Find(results, Policy::kStatic);
  const PolicyResult* p = Find(results, policy);
  if (s == nullptr || p == nullptr || s->utilisation <= 0.0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return 100.0 * (p->utilisation - s->utilisation) / s->utilisation;
}

std::string FormatTable(const std::vector<PolicyResult>& results) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-17s %6s %6s %6s %9s %9s %9s %9s %9s %8s %10s %9s\n", "policy",
                "util", "train", "infer", "done", "jct_mean", "jct_p95", "queue_p50", "queue_p95",
                "preempt", "inf_wait", "sched_ms");
  out << line;
  for (const PolicyResult& r : results) {
    std::snprintf(line, sizeof line,
                  "%-17s %5.1f%% %5.1f%% %5.1f%% %4d/%-4d %9s %9s %9s %9s %8d %9.4f%% %9.2f\n",
                  PolicyName(r.policy), 100 * r.utilisation, 100 * r.trainingShare,
                  100 * r.inferenceShare, r.jobsCompleted, r.jobsSubmitted,
                  Hours(r.completionSeconds.mean).c_str(), Hours(r.completionSeconds.p95).c_str(),
                  Hours(r.queueingSeconds.p50).c_str(), Hours(r.queueingSeconds.p95).c_str(),
                  r.preemptedWorkers, 100 * r.inferenceWaitFraction, r.decisionMs.mean);
    out << line;
  }
  out << "util: busy GPUs (training + inference) / all GPUs, time-averaged; inf_wait: share of\n"
         "inference GPU demand left waiting; preempt: workers preempted; sched_ms: mean "
         "decision.\n";
  return out.str();
}

std::string FormatJobTable(const std::vector<PolicyResult>& results) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-17s %9s %9s %9s %7s %7s %7s %8s %8s %8s\n", "policy",
                "jct_mean", "jct_p95", "makespan", "useful", "alloc", "waste", "reconf", "slow_avg",
                "slow_p95");
  out << line;
  for (const PolicyResult& r : results) {
    const double span = std::max(r.makespan, 1e-9) * r.totalGpus;
    std::snprintf(line, sizeof line,
                  "%-17s %8.0fs %8.0fs %8.0fs %6.1f%% %6.1f%% %6.1f%% %8d %8.2f %8.2f\n",
                  PolicyName(r.policy), r.completionSeconds.mean, r.completionSeconds.p95,
                  r.makespan, 100 * r.usefulUtilisation, 100 * r.gpuTime.allocated / span,
                  100 * r.wasteFraction, r.reconfigurations, r.slowdown.mean, r.slowdown.p95);
    out << line;
  }
  out << "over the makespan (last finish): useful = GPU time computing / all GPU time; alloc =\n"
         "GPU time held by training; waste = idle within steps / held; slow = JCT / JCT alone on\n"
         "the preferred GPUs.\n";
  return out.str();
}

nlohmann::json ToJson(const std::vector<PolicyResult>& results, const Trace& trace,
                      const SimOptions& options) {
  nlohmann::json policies = nlohmann::json::array();
  for (const PolicyResult& r : results) {
    nlohmann::json byType = nlohmann::json::object();
    for (const auto& [type, g] : r.gpuTimeByType) byType[type] = GpuTimeJson(g);
    nlohmann::json perJob = nlohmann::json::array();
    for (const JobOutcome& o : r.jobs) {
      perJob.push_back({{"name", o.name},
                        {"jctSeconds", o.jct},
                        {"aloneSeconds", o.aloneJct},
                        {"slowdown", o.slowdown},
                        {"reconfigurations", o.reconfigurations},
                        {"gpuSeconds", GpuTimeJson(o.gpuTime)}});
    }
    policies.push_back({
        {"policy", PolicyName(r.policy)},
        {"utilisation",
         {{"mean", r.utilisation},
          {"bucketSeconds", r.horizon / r.utilisationSeries.size()},
          {"series", r.utilisationSeries}}},
        {"trainingShare", r.trainingShare},
        {"inferenceShare", r.inferenceShare},
        {"jobs",
         {{"submitted", r.jobsSubmitted},
          {"started", r.jobsStarted},
          {"completed", r.jobsCompleted},
          {"completionSeconds", SummaryJson(r.completionSeconds)},
          {"queueingSeconds", SummaryJson(r.queueingSeconds)}}},
        {"preemptions", {{"events", r.preemptionEvents}, {"workers", r.preemptedWorkers}}},
        {"reconfigurations", r.reconfigurations},
        {"inferenceWait",
         {{"gpuSeconds", r.inferenceWaitGpuSeconds},
          {"fractionOfDemand", r.inferenceWaitFraction}}},
        {"trainedSamples", r.trainedSamples},
        {"makespanSeconds", r.makespan},
        {"usefulUtilisation", r.usefulUtilisation},
        {"wasteFraction", r.wasteFraction},
        {"slowdown", SummaryJson(r.slowdown)},
        {"gpuSeconds", GpuTimeJson(r.gpuTime)},
        {"gpuSecondsByType", byType},
        {"perJob", perJob},
        {"scheduler",
         {{"decisions", r.decisions},
          {"meanMs", r.decisionMs.mean},
          {"p50Ms", r.decisionMs.p50},
          {"p95Ms", r.decisionMs.p95},
          {"maxMs", r.decisionMaxMs}}},
    });
  }
  nlohmann::json gains = nlohmann::json::object();
  for (Policy p : {Policy::kEasyScale, Policy::kHomogeneous}) {
    const double g = UtilisationGainOverStatic(results, p);
    if (std::isfinite(g)) gains[PolicyName(p)] = g;
  }
  return {{"trace",
           {{"horizonSeconds", trace.horizon},
            {"nodes", trace.nodes.size()},
            {"gpus", trace.TotalGpus()},
            {"jobs", trace.jobs.size()},
            {"inferenceRecords", trace.inference.size()}}},
          {"options",
           {{"tickSeconds", options.tick},
            {"rescalePauseSeconds", options.rescalePause},
            {"preemptLatencySeconds", options.preemptLatency}}},
          {"policies", policies},
          {"utilisationGainOverStaticPercent", gains}};
}

std::string RenderSvg(const std::vector<PolicyResult>& results, const std::string& title) {
  constexpr int kW = 960, kH = 440, kLeft = 70, kRight = 190, kTop = 50, kBottom = 60;
  const int plotW = kW - kLeft - kRight, plotH = kH - kTop - kBottom;
  const char* colours[] = {"#1b7837", "#2166ac", "#b2182b"};
  const double horizon = results.empty() ? 1.0 : results[0].horizon;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
    << "\" viewBox=\"0 0 " << kW << " " << kH << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kW / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"17\">" << title
    << "</text>\n";
  auto x = [&](double t) { return kLeft + plotW * t / horizon; };
  auto y = [&](double u) { return kTop + plotH * (1.0 - u); };
  // Grid and axes: utilisation every 20%, time every day (or hour when short).
  for (int p = 0; p <= 100; p += 20) {
    s << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + plotW << "\" y1=\"" << y(p / 100.0)
      << "\" y2=\"" << y(p / 100.0) << "\" stroke=\"#ddd\"/>\n"
      << "<text x=\"" << kLeft - 8 << "\" y=\"" << y(p / 100.0) + 4 << "\" text-anchor=\"end\">"
      << p << "%</text>\n";
  }
  // Every hour, 6 hours or day; past a dozen ticks, every so many days.
  constexpr double kMaxTicks = 12;
  double step = horizon > 2 * 86400.0 ? 86400.0 : (horizon > 12 * 3600.0 ? 6 * 3600.0 : 3600.0);
  step *= std::max(1.0, std::ceil(horizon / step / kMaxTicks));
  const bool days = step >= 86400.0;
  for (double t = 0.0; t <= horizon + 1e-6; t += step) {
    s << "<line x1=\"" << x(t) << "\" x2=\"" << x(t) << "\" y1=\"" << kTop << "\" y2=\""
      << kTop + plotH << "\" stroke=\"#eee\"/>\n"
      << "<text x=\"" << x(t) << "\" y=\"" << kTop + plotH + 18 << "\" text-anchor=\"middle\">"
      << (days ? t / 86400.0 : t / 3600.0) << (days ? "d" : "h") << "</text>\n";
  }
  s << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plotW << "\" height=\""
    << plotH << "\" fill=\"none\" stroke=\"#333\"/>\n"
    << "<text x=\"" << kLeft + plotW / 2 << "\" y=\"" << kH - 15
    << "\" text-anchor=\"middle\">simulated time</text>\n"
    << "<text transform=\"translate(18," << kTop + plotH / 2
    << ") rotate(-90)\" text-anchor=\"middle\">GPU utilisation (training + inference)</text>\n";
  auto polyline = [&](const std::vector<double>& series, const char* colour, const char* extra) {
    const double bucket = horizon / series.size();
    s << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.6\" " << extra
      << " points=\"";
    for (size_t b = 0; b < series.size(); ++b) {
      s << Fixed(x((b + 0.5) * bucket), 1) << "," << Fixed(y(series[b]), 1) << " ";
    }
    s << "\"/>\n";
  };
  // Inference alone, as an elastic policy serves it in full: the floor every
  // policy builds on, and all a cluster without training on these GPUs gets.
  const PolicyResult* elastic = nullptr;
  for (const PolicyResult& r : results) {
    if (r.policy != Policy::kStatic) elastic = &r;
  }
  if (elastic != nullptr) {
    polyline(elastic->inferenceSeries, "#777", "stroke-dasharray=\"5,4\"");
    const int ly = kTop + 20 + 44 * static_cast<int>(results.size());
    s << "<line x1=\"" << kLeft + plotW + 14 << "\" x2=\"" << kLeft + plotW + 40 << "\" y1=\"" << ly
      << "\" y2=\"" << ly << "\" stroke=\"#777\" stroke-width=\"3\" stroke-dasharray=\"5,4\"/>\n"
      << "<text x=\"" << kLeft + plotW + 46 << "\" y=\"" << ly + 4 << "\">inference only</text>\n"
      << "<text x=\"" << kLeft + plotW + 46 << "\" y=\"" << ly + 20 << "\" fill=\"#555\">mean "
      << Fixed(100 * elastic->inferenceShare, 1) << "%</text>\n";
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const PolicyResult& r = results[i];
    const char* colour = colours[static_cast<int>(r.policy) % 3];
    polyline(r.utilisationSeries, colour, "");
    const int ly = kTop + 20 + 44 * static_cast<int>(i);
    s << "<line x1=\"" << kLeft + plotW + 14 << "\" x2=\"" << kLeft + plotW + 40 << "\" y1=\"" << ly
      << "\" y2=\"" << ly << "\" stroke=\"" << colour << "\" stroke-width=\"3\"/>\n"
      << "<text x=\"" << kLeft + plotW + 46 << "\" y=\"" << ly + 4 << "\">" << PolicyName(r.policy)
      << "</text>\n"
      << "<text x=\"" << kLeft + plotW + 46 << "\" y=\"" << ly + 20 << "\" fill=\"#555\">mean "
      << Fixed(100 * r.utilisation, 1) << "%</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace easyscale::sim
