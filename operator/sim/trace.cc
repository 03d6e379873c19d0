#include "trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "csv_record.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"
#include "easyscale/common/job_spec.h"

namespace easyscale::sim {
namespace {

Status ParseJob(const Record& r, TraceJob* j) {
  ES_RETURN_IF_ERROR(r.Number(1, 0.0, kMaxTraceSeconds, &j->submit));
  ES_RETURN_IF_ERROR(r.Name(2));
  j->name = r.Text(2);
  ES_RETURN_IF_ERROR(r.Int(3, 1, 1 << 20, &j->ests));
  ES_RETURN_IF_ERROR(r.Int(4, 1, j->ests, &j->minWorkers));
  ES_RETURN_IF_ERROR(r.Int(5, j->minWorkers, j->ests, &j->maxWorkers));
  ES_RETURN_IF_ERROR(r.Int(6, -1000000, 1000000, &j->priority));
  ES_RETURN_IF_ERROR(r.Number(7, 0.0, kMaxWorkSamples, &j->workSamples));
  if (!(j->workSamples > 0.0)) return r.FieldError(7, "must be > 0");
  if (r.Text(8) != "*") {
    for (const std::string& t : std::vector<std::string>(absl::StrSplit(r.Text(8), '|'))) {
      ES_RETURN_IF_ERROR(GpuType(r, 8, t));
      j->gpuTypes.push_back(t);
    }
  }
  if (r.Text(9) != "-") {
    for (const std::string& pair : std::vector<std::string>(absl::StrSplit(r.Text(9), '|'))) {
      const std::vector<std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
      double v = 0.0;
      if (kv.size() != 2 ||
          std::from_chars(kv[1].data(), kv[1].data() + kv[1].size(), v).ptr !=
              kv[1].data() + kv[1].size() ||
          !(v > 0.0 && v <= kMaxSpeed)) {
        return r.FieldError(
            9, absl::StrCat("entry '", pair, "' must be <gpuType>=<samples/s in (0, ", kMaxSpeed,
                            "]>"));
      }
      ES_RETURN_IF_ERROR(GpuType(r, 9, kv[0]));
      j->speed[kv[0]] = v;
    }
  }
  return absl::OkStatus();
}

}  // namespace

int Trace::TotalGpus() const {
  int n = 0;
  for (const TraceNode& node : nodes) n += node.gpus;
  return n;
}

StatusOr<Trace> ParseTrace(const std::string& text, const std::string& source) {
  Trace trace;
  std::map<std::string, int> nodeGpus;
  std::set<std::string> jobNames;
  bool sawMagic = false, sawHorizon = false;
  std::istringstream in(text);
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    Record r(absl::StrSplit(line, ','), absl::StrCat(source, ":", lineNo));
    const std::string kind = r.Text(0);
    if (!sawMagic) {
      if (line != absl::StrCat(kTraceMagic, ",", kTraceVersion)) {
        return r.Error(
            absl::StrCat("first record must be '", kTraceMagic, ",", kTraceVersion, "'"));
      }
      sawMagic = true;
    } else if (kind == "horizon") {
      ES_RETURN_IF_ERROR(r.Arity({"seconds"}));
      ES_RETURN_IF_ERROR(r.Number(1, 1.0, kMaxTraceSeconds, &trace.horizon));
      sawHorizon = true;
    } else if (kind == "node") {
      ES_RETURN_IF_ERROR(r.Arity({"name", "gpuType", "gpus"}));
      TraceNode n;
      ES_RETURN_IF_ERROR(r.Name(1));
      n.name = r.Text(1);
      if (nodeGpus.count(n.name)) return r.FieldError(1, "repeats node '" + n.name + "'");
      ES_RETURN_IF_ERROR(GpuType(r, 2, r.Text(2)));
      n.gpuType = r.Text(2);
      ES_RETURN_IF_ERROR(r.Int(3, 1, 1024, &n.gpus));
      if (trace.TotalGpus() > kMaxTraceGpus - n.gpus) {
        return r.Error(absl::StrCat("the nodes have more than ", kMaxTraceGpus, " GPUs"));
      }
      nodeGpus[n.name] = n.gpus;
      trace.nodes.push_back(n);
    } else if (kind == "inference") {
      ES_RETURN_IF_ERROR(r.Arity({"time_s", "node", "gpus"}));
      InferenceLevel l;
      ES_RETURN_IF_ERROR(r.Number(1, 0.0, kMaxTraceSeconds, &l.time));
      l.node = r.Text(2);
      const auto it = nodeGpus.find(l.node);
      if (it == nodeGpus.end())
        return r.FieldError(2, "names no node declared above: '" + l.node + "'");
      ES_RETURN_IF_ERROR(r.Int(3, 0, it->second, &l.gpus));
      trace.inference.push_back(l);
    } else if (kind == "job") {
      ES_RETURN_IF_ERROR(r.Arity({"submit_s", "name", "ests", "minWorkers", "maxWorkers",
                                  "priority", "work_samples", "gpuTypes", "speeds"}));
      TraceJob j;
      ES_RETURN_IF_ERROR(ParseJob(r, &j));
      if (!jobNames.insert(j.name).second) return r.FieldError(2, "repeats job '" + j.name + "'");
      if (trace.jobs.size() == kMaxTraceJobs) {
        return r.Error(absl::StrCat("more than ", kMaxTraceJobs, " job records"));
      }
      trace.jobs.push_back(std::move(j));
    } else {
      return r.Error(absl::StrCat("field 1 (record) must be horizon, node, inference or job, got '",
                                  kind, "'"));
    }
  }
  if (!sawMagic) return absl::InvalidArgumentError(source + ": empty trace");
  if (trace.nodes.empty()) return absl::InvalidArgumentError(source + ": no node records");
  std::stable_sort(trace.inference.begin(), trace.inference.end(),
                   [](const auto& a, const auto& b) { return a.time < b.time; });
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const auto& a, const auto& b) { return a.submit < b.submit; });
  if (!sawHorizon) {
    // Without a horizon: one day past the last event.
    double last = 0.0;
    if (!trace.inference.empty()) last = trace.inference.back().time;
    if (!trace.jobs.empty()) last = std::max(last, trace.jobs.back().submit);
    trace.horizon = last + 86400.0;
  }
  return trace;
}

StatusOr<Trace> ReadTraceFile(const std::string& path) {
  ES_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxTraceFileBytes));
  return ParseTrace(text, path);
}

std::string FormatTrace(const Trace& t) {
  std::ostringstream out;
  out.precision(12);
  out << kTraceMagic << "," << kTraceVersion << "\n";
  out << "# record types: see operator/sim/TRACE_FORMAT.md\n";
  out << "horizon," << t.horizon << "\n";
  for (const TraceNode& n : t.nodes)
    out << "node," << n.name << "," << n.gpuType << "," << n.gpus << "\n";
  for (const InferenceLevel& l : t.inference) {
    out << "inference," << l.time << "," << l.node << "," << l.gpus << "\n";
  }
  for (const TraceJob& j : t.jobs) {
    out << "job," << j.submit << "," << j.name << "," << j.ests << "," << j.minWorkers << ","
        << j.maxWorkers << "," << j.priority << "," << j.workSamples << ","
        << (j.gpuTypes.empty() ? "*" : absl::StrJoin(j.gpuTypes, "|")) << ",";
    if (j.speed.empty()) {
      out << "-";
    } else {
      out << absl::StrJoin(j.speed, "|", absl::PairFormatter("="));
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace easyscale::sim
