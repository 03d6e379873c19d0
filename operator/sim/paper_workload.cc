#include "paper_workload.h"

#include <algorithm>
#include <sstream>

#include "absl/strings/str_split.h"
#include "csv_record.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/file_io.h"

namespace easyscale::sim {
namespace {

// Splits `text` into trimmed-of-'\r' lines, skipping empty ones and '#'
// comments, and calls visit(lineNo, line) until it fails.
template <typename Visit>
Status ForEachLine(const std::string& text, Visit&& visit) {
  std::istringstream in(text);
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    ES_RETURN_IF_ERROR(visit(lineNo, line));
  }
  return absl::OkStatus();
}

// The row's fields behind a placeholder record type (the files have none).
Record Row(const std::string& line, const std::string& source, int lineNo) {
  std::vector<std::string> fields = {"row"};
  for (absl::string_view f : absl::StrSplit(line, ',')) fields.emplace_back(f);
  return Record(std::move(fields), absl::StrCat(source, ":", lineNo), false);
}

constexpr const char* kProfileHeader = "model,gpu_type,batch_size,step_seconds,samples_per_epoch";
constexpr const char* kWorkloadHeader =
    "name,time,application,max_parallelism,batch_size,epochs,"
    "enable_heterogeneous_deterministic,preferred_gpu";

}  // namespace

double ModelProfile::StepSeconds(const std::string& gpuType, int batch) const {
  const auto it = byGpu.find(gpuType);
  if (it == byGpu.end()) return 0.0;
  return it->second.seconds * batch / it->second.batch;
}

StatusOr<StepProfile> ParseStepProfile(const std::string& text, const std::string& source) {
  StepProfile p;
  bool sawHeader = false;
  ES_RETURN_IF_ERROR(ForEachLine(text, [&](int lineNo, const std::string& line) -> Status {
    Record r = Row(line, source, lineNo);
    if (!sawHeader) {
      sawHeader = true;
      if (line != kProfileHeader)
        return r.Error(absl::StrCat("header must be '", kProfileHeader, "'"));
      return absl::OkStatus();
    }
    ES_RETURN_IF_ERROR(
        r.Arity({"model", "gpu_type", "batch_size", "step_seconds", "samples_per_epoch"}));
    ES_RETURN_IF_ERROR(r.Name(1));
    ES_RETURN_IF_ERROR(GpuType(r, 2, r.Text(2)));
    ModelProfile::Point point;
    double epoch = 0.0;
    ES_RETURN_IF_ERROR(r.Int(3, 1, 1 << 24, &point.batch));
    ES_RETURN_IF_ERROR(r.Number(4, 1e-9, 86400.0, &point.seconds));
    ES_RETURN_IF_ERROR(r.Number(5, 1e-9, kMaxWorkSamples, &epoch));
    ModelProfile& m = p.models[r.Text(1)];
    if (m.samplesPerEpoch > 0.0 && m.samplesPerEpoch != epoch) {
      return r.FieldError(5, absl::StrCat("differs from the model's earlier rows (",
                                          Plain(m.samplesPerEpoch), ")"));
    }
    m.samplesPerEpoch = epoch;
    if (!m.byGpu.emplace(r.Text(2), point).second) {
      return r.FieldError(2, absl::StrCat("repeats '", r.Text(2), "' for model '", r.Text(1), "'"));
    }
    return absl::OkStatus();
  }));
  if (p.models.empty()) return absl::InvalidArgumentError(source + ": no profile rows");
  return p;
}

StatusOr<StepProfile> ReadStepProfileFile(const std::string& path) {
  ES_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxTraceFileBytes));
  return ParseStepProfile(text, path);
}

StatusOr<Trace> ParsePaperWorkload(const std::string& text, const std::string& source,
                                   const StepProfile& profile, const PaperCluster& cluster) {
  Trace trace;
  for (const auto& [type, gpus] : cluster.gpus) {
    for (int n = 0, left = gpus; left > 0; ++n, left -= cluster.gpusPerNode) {
      trace.nodes.push_back(
          TraceNode{absl::StrCat(type, "-", n), type, std::min(left, cluster.gpusPerNode)});
    }
  }
  std::map<std::string, size_t> byName;
  bool sawHeader = false;
  ES_RETURN_IF_ERROR(ForEachLine(text, [&](int lineNo, const std::string& line) -> Status {
    Record r = Row(line, source, lineNo);
    if (!sawHeader) {
      sawHeader = true;
      // The artifact's header ends with a comma: a ninth, unnamed column.
      if (line != kWorkloadHeader && line != absl::StrCat(kWorkloadHeader, ",")) {
        return r.Error(absl::StrCat("header must be '", kWorkloadHeader, "' (optionally ',')"));
      }
      return absl::OkStatus();
    }
    // The unnamed ninth column, present on most of the artifact's rows, is
    // not read by its simulator; it is ignored here too.
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    if (fields.size() == 9) fields.pop_back();
    r = Row(absl::StrJoin(fields, ","), source, lineNo);
    ES_RETURN_IF_ERROR(r.Arity({"name", "time", "application", "max_parallelism", "batch_size",
                                "epochs", "enable_heterogeneous_deterministic", "preferred_gpu"}));
    TraceJob j;
    ES_RETURN_IF_ERROR(r.Name(1));
    j.name = r.Text(1);
    ES_RETURN_IF_ERROR(r.Number(2, 0.0, kMaxTraceSeconds, &j.submit));
    const auto model = profile.models.find(r.Text(3));
    if (model == profile.models.end()) {
      return r.FieldError(3, absl::StrCat("names no profiled model: '", r.Text(3), "'"));
    }
    ES_RETURN_IF_ERROR(r.Int(4, 1, 1 << 20, &j.ests));
    j.maxWorkers = j.ests;
    int batch = 0, heterogeneous = 0;
    double epochs = 0.0;
    ES_RETURN_IF_ERROR(r.Int(5, 1, 1 << 24, &batch));
    ES_RETURN_IF_ERROR(r.Number(6, 1e-9, 1e9, &epochs));
    // The artifact reads the flag as a boolean: any non-zero count is true.
    ES_RETURN_IF_ERROR(r.Int(7, 0, 1000000, &heterogeneous));
    ES_RETURN_IF_ERROR(GpuType(r, 8, r.Text(8)));
    j.preferredGpu = r.Text(8);
    if (!cluster.gpus.count(j.preferredGpu) || !model->second.byGpu.count(j.preferredGpu)) {
      return r.FieldError(
          8, absl::StrCat("'", j.preferredGpu, "' is not both in the cluster and profiled for '",
                          model->first, "'"));
    }
    j.workSamples = epochs * model->second.samplesPerEpoch;
    if (!(j.workSamples <= kMaxWorkSamples)) return r.FieldError(6, "makes the work too large");
    for (const auto& [type, gpus] : cluster.gpus) {
      if (!model->second.byGpu.count(type)) continue;
      if (heterogeneous == 0 && type != j.preferredGpu) continue;
      j.gpuTypes.push_back(type);
      j.speed[type] = batch / model->second.StepSeconds(type, batch);
    }
    if (const auto it = byName.find(j.name); it != byName.end()) {
      trace.jobs[it->second] = std::move(j);
    } else {
      byName[j.name] = trace.jobs.size();
      trace.jobs.push_back(std::move(j));
    }
    return absl::OkStatus();
  }));
  if (!sawHeader) return absl::InvalidArgumentError(source + ": empty workload");
  if (trace.jobs.empty()) return absl::InvalidArgumentError(source + ": no job rows");
  std::stable_sort(trace.jobs.begin(), trace.jobs.end(),
                   [](const auto& a, const auto& b) { return a.submit < b.submit; });
  // Long enough for any policy that keeps one GPU busy: every job in turn on
  // one GPU of its preferred type.
  trace.horizon = trace.jobs.back().submit + 3600.0;
  for (const TraceJob& j : trace.jobs) {
    trace.horizon += j.workSamples / j.speed.at(j.preferredGpu);
  }
  trace.horizon = std::min(trace.horizon, kMaxTraceSeconds);
  return trace;
}

StatusOr<Trace> ReadPaperWorkloadFile(const std::string& path, const StepProfile& profile,
                                      const PaperCluster& cluster) {
  ES_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxTraceFileBytes));
  return ParsePaperWorkload(text, path, profile, cluster);
}

}  // namespace easyscale::sim
