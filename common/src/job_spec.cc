#include "easyscale/common/job_spec.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <type_traits>

#include "absl/strings/str_join.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/json_fields.h"

namespace easyscale {

const std::vector<std::string>& KnownGpuTypes() {
  static const std::vector<std::string> kTypes = {"h200", "h100", "a100", "a10", "l4",
                                                  "v100", "p100", "t4",   "cpu"};
  return kTypes;
}

bool IsKnownGpuType(const std::string& type) {
  const auto& t = KnownGpuTypes();
  return std::find(t.begin(), t.end(), type) != t.end();
}

bool IsDns1123Subdomain(const std::string& s) {
  static const std::regex kRe("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return !s.empty() && s.size() <= 253 && std::regex_match(s, kRe);
}

bool IsDns1123Label(const std::string& s) {
  static const std::regex kRe("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return !s.empty() && s.size() <= 63 && std::regex_match(s, kRe);
}

bool IsLabelValue(const std::string& s) {
  static const std::regex kRe("(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?");
  return s.size() <= 63 && std::regex_match(s, kRe);
}

bool IsQualifiedLabelKey(const std::string& s) {
  const size_t slash = s.find('/');
  const std::string name = slash == std::string::npos ? s : s.substr(slash + 1);
  if (slash != std::string::npos && !IsDns1123Subdomain(s.substr(0, slash))) return false;
  return !name.empty() && IsLabelValue(name);
}

bool IsQuantity(const std::string& s) {
  static const std::regex kRe("[+]?[0-9.]+([eEinumkKMGTP]*[-+]?[0-9]*)");
  return !s.empty() && s.size() <= 64 && std::regex_match(s, kRe) &&
         std::any_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

namespace {

constexpr int64_t kMaxSteps = 100000000;  // the CRD's bound on steps and step counts

// Resources a job may set on its workers; the GPU is the operator's.
constexpr const char* kWorkerResources[] = {"cpu", "memory", "ephemeral-storage"};

void ReadResources(FieldReader& r, const char* name, std::map<std::string, std::string>* out) {
  std::map<std::string, std::string> values = *out;
  r.StringMap(name, &values);
  if (!r.ok() || !r.Has(name)) return;
  for (const auto& [resource, quantity] : values) {
    const std::string field = std::string(name) + "." + resource;
    if (std::find(std::begin(kWorkerResources), std::end(kWorkerResources), resource) ==
        std::end(kWorkerResources)) {
      return r.Fail(field,
                    "unsupported resource (cpu, memory or ephemeral-storage; the operator "
                    "sets the GPU)");
    }
    if (!IsQuantity(quantity)) return r.Fail(field, "\"" + quantity + "\" is not a quantity");
  }
  *out = std::move(values);
}

Status ParseTolerations(const nlohmann::json& list, const std::string& path) {
  if (!list.is_array()) return absl::InvalidArgumentError(path + ": must be a list");
  for (size_t i = 0; i < list.size(); ++i) {
    FieldReader t(list[i], absl::StrCat(path, "[", i, "]"));
    std::string key, op = "Equal", value, effect;
    int64_t seconds = 0;
    t.String("key", &key);
    t.Enum("operator", &op, {"Equal", "Exists"});
    t.String("value", &value);
    t.Enum("effect", &effect, {"", "NoSchedule", "PreferNoSchedule", "NoExecute"});
    t.Int("tolerationSeconds", &seconds);
    for (const auto& [k, v] : list[i].items()) {
      if (k != "key" && k != "operator" && k != "value" && k != "effect" &&
          k != "tolerationSeconds") {
        t.Fail(k, "unknown field");
      }
    }
    if (t.ok() && !key.empty() && !IsQualifiedLabelKey(key)) t.Fail("key", "not a label key");
    if (t.ok() && op == "Exists" && !value.empty()) {
      t.Fail("value", "must be empty when operator is Exists");
    }
    if (t.ok() && key.empty() && op != "Exists") {
      t.Fail("operator", "must be Exists when key is empty");
    }
    ES_RETURN_IF_ERROR(t.status());
  }
  return absl::OkStatus();
}

// `operatorMountPaths`: what the operator mounts itself, which volumes keep off.
Status ParseWorkerPodSettings(const nlohmann::json& j, const std::string& path,
                              const std::vector<std::string>& operatorMountPaths,
                              WorkerPodSettings* w) {
  FieldReader r(j, path);
  if (const nlohmann::json* res = r.Object("resources")) {
    FieldReader rr(*res, r.FieldPath("resources"));
    ReadResources(rr, "requests", &w->requests);
    ReadResources(rr, "limits", &w->limits);
    ES_RETURN_IF_ERROR(rr.status());
  }
  if (r.Has("tolerations")) {
    ES_RETURN_IF_ERROR(ParseTolerations(j["tolerations"], r.FieldPath("tolerations")));
    w->tolerations = j["tolerations"];
  }
  r.StringMap("nodeSelector", &w->nodeSelector);
  for (const auto& [key, value] : w->nodeSelector) {
    if (!IsQualifiedLabelKey(key)) r.Fail("nodeSelector." + key, "not a label key");
    if (!IsLabelValue(value))
      r.Fail("nodeSelector." + key, "\"" + value + "\" is not a label value");
    if (key.rfind("easyscale.io/", 0) == 0) {
      r.Fail("nodeSelector." + key, "easyscale.io/ labels are the operator's to select");
    }
  }
  if (r.Has("imagePullSecrets")) {
    const nlohmann::json& secrets = j["imagePullSecrets"];
    if (!secrets.is_array()) r.Fail("imagePullSecrets", "must be a list");
    for (size_t i = 0; r.ok() && i < secrets.size(); ++i) {
      FieldReader sr(secrets[i], r.FieldPath(absl::StrCat("imagePullSecrets[", i, "]")));
      std::string name;
      sr.String("name", &name, true);
      if (sr.ok() && !IsDns1123Subdomain(name)) sr.Fail("name", "not a DNS-1123 subdomain");
      ES_RETURN_IF_ERROR(sr.status());
      w->imagePullSecrets.push_back(name);
    }
  }
  r.String("serviceAccountName", &w->serviceAccountName);
  if (r.ok() && !w->serviceAccountName.empty() && !IsDns1123Subdomain(w->serviceAccountName)) {
    r.Fail("serviceAccountName", "not a DNS-1123 subdomain");
  }
  r.String("shmSize", &w->shmSize);
  if (r.ok() && !IsQuantity(w->shmSize))
    r.Fail("shmSize", "\"" + w->shmSize + "\" is not a quantity");
  if (r.ok() && r.Has("volumes")) {
    ES_ASSIGN_OR_RETURN(w->volumes,
                        ParseJobVolumes(j["volumes"], r.FieldPath("volumes"), operatorMountPaths));
  }
  return r.status();
}

// Both lists or neither; each of one value or one per channel (the data's
// channel count is checked against them when the data is loaded), at most
// kMaxNormalizeChannels, finite, std > 0.
Status ValidateNormalization(const TrainingArgs& t,
                             const std::function<std::string(std::string_view)>& name) {
  constexpr size_t kMaxNormalizeChannels = 64;
  if (t.normalizeMean.empty() != t.normalizeStd.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(t.normalizeMean.empty() ? "normalizeMean" : "normalizeStd"), ": must be given with ",
        name(t.normalizeMean.empty() ? "normalizeStd" : "normalizeMean")));
  }
  for (const auto& [field, values] :
       {std::pair{"normalizeMean", &t.normalizeMean}, std::pair{"normalizeStd", &t.normalizeStd}}) {
    if (values->size() > kMaxNormalizeChannels) {
      return absl::InvalidArgumentError(absl::StrCat(
          name(field), ": at most ", kMaxNormalizeChannels, " values, got ", values->size()));
    }
    for (size_t i = 0; i < values->size(); ++i) {
      const double v = (*values)[i];
      const bool std_field = values == &t.normalizeStd;
      if (!std::isfinite(v) || (std_field && !(v > 0.0))) {
        return absl::InvalidArgumentError(absl::StrCat(name(field), "[", i, "]: must be a finite ",
                                                       std_field ? "number > 0" : "number",
                                                       ", got ", v));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<TrainingArgs> ParseTrainingArgs(const nlohmann::json& j, const std::string& path) {
  TrainingArgs t;
  FieldReader r(j, path);
  r.String("model", &t.model);
  r.String("modelFile", &t.modelFile);
  r.String("dataset", &t.dataset);
  r.String("data", &t.data);
  r.DoubleList("normalizeMean", &t.normalizeMean);
  r.DoubleList("normalizeStd", &t.normalizeStd);
  r.Int("steps", &t.steps);
  int64_t seed = static_cast<int64_t>(t.seed);
  r.Int("seed", &seed, false, 0);
  t.seed = static_cast<uint64_t>(seed);
  r.Int("batchPerEst", &t.batchPerEst);
  r.String("optimizer", &t.optimizer);
  r.Double("learningRate", &t.learningRate);
  r.Double("momentum", &t.momentum);
  r.Double("weightDecay", &t.weightDecay);
  r.String("lrSchedule", &t.lrSchedule);
  r.Int("warmupSteps", &t.warmupSteps);
  r.Bool("augment", &t.augment);
  r.Int("checkpointEvery", &t.checkpointEvery);
  if (!r.ok()) return r.status();
  ES_RETURN_IF_ERROR(ValidateTrainingArgs(t, path));
  return t;
}

StatusOr<OutputSpec> ParseOutputSpec(const nlohmann::json& j, const std::string& path) {
  OutputSpec o;
  FieldReader r(j, path);
  r.String("path", &o.path);
  r.Bool("everyCheckpoint", &o.everyCheckpoint);
  if (r.ok() && !o.path.empty() && o.path[0] != '/') r.Fail("path", "must be an absolute path");
  if (r.ok() && o.everyCheckpoint && o.path.empty()) {
    r.Fail("everyCheckpoint", "needs a path to write into");
  }
  ES_RETURN_IF_ERROR(r.status());
  return o;
}

Status ValidateTrainingArgs(const TrainingArgs& t, const std::string& path) {
  return ValidateTrainingArgs(
      t, [&path](std::string_view field) { return path + "." + std::string(field); });
}

Status ValidateTrainingArgs(const TrainingArgs& t,
                            const std::function<std::string(std::string_view)>& name) {
  auto fail = [&](std::string_view field, const std::string& message) {
    return absl::InvalidArgumentError(name(field) + ": " + message);
  };
  auto one_of = [&](std::string_view field, const std::string& v,
                    const std::vector<std::string>& allowed) {
    if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return absl::OkStatus();
    return fail(field, "must be one of " + absl::StrJoin(allowed, ", ") + ", got \"" + v + "\"");
  };
  // NaN compares false with everything: it fails both bounds.
  auto in_range = [&](std::string_view field, auto v, auto lo, auto hi) {
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      if (!std::isfinite(v)) return fail(field, absl::StrCat("must be a finite number, got ", v));
    }
    if (!(v >= lo)) return fail(field, absl::StrCat("must be >= ", lo, ", got ", v));
    if (!(v <= hi)) return fail(field, absl::StrCat("must be <= ", hi, ", got ", v));
    return absl::OkStatus();
  };
  ES_RETURN_IF_ERROR(one_of("model", t.model, {"mlp", "cnn", "file"}));
  if ((t.model == "file") != !t.modelFile.empty()) {
    return fail("modelFile", t.model == "file" ? "is required when model is \"file\""
                                               : "is only for model \"file\"");
  }
  ES_RETURN_IF_ERROR(one_of("dataset", t.dataset, {"mnist", "synthetic", "tokens"}));
  constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX; the CRD's maxLength
  if (t.data.size() > kMaxPathBytes) {
    return fail("data", absl::StrCat("must be at most ", kMaxPathBytes, " characters, got ",
                                     t.data.size()));
  }
  if (!t.data.empty() && t.dataset != "mnist") {
    return fail("dataset", "must stay at its default (mnist) when " + name("data") +
                               " names the data, got \"" + t.dataset + "\"");
  }
  ES_RETURN_IF_ERROR(ValidateNormalization(t, name));
  ES_RETURN_IF_ERROR(in_range("steps", t.steps, int64_t{1}, kMaxSteps));
  ES_RETURN_IF_ERROR(in_range("batchPerEst", t.batchPerEst, 1, 65536));
  ES_RETURN_IF_ERROR(one_of("optimizer", t.optimizer, {"sgd", "adam"}));
  if (t.learningRate <= 0.0) {
    return fail("learningRate", absl::StrCat("must be > 0, got ", t.learningRate));
  }
  ES_RETURN_IF_ERROR(in_range("learningRate", t.learningRate, 0.0, 10.0));
  ES_RETURN_IF_ERROR(in_range("momentum", t.momentum, 0.0, 0.999999));
  ES_RETURN_IF_ERROR(in_range("weightDecay", t.weightDecay, 0.0, 1.0));
  ES_RETURN_IF_ERROR(one_of("lrSchedule", t.lrSchedule, {"constant", "step", "cosine"}));
  ES_RETURN_IF_ERROR(in_range("warmupSteps", t.warmupSteps, int64_t{0}, kMaxSteps));
  if (t.warmupSteps >= t.steps) {
    return fail("warmupSteps",
                absl::StrCat("must be < ", name("steps"), " (", t.steps, "), got ", t.warmupSteps));
  }
  return in_range("checkpointEvery", t.checkpointEvery, int64_t{0}, kMaxSteps);
}

StatusOr<JobSpec> ParseJobSpec(const nlohmann::json& j, const std::string& path) {
  JobSpec s;
  FieldReader r(j, path);
  r.String("image", &s.image, /*required=*/true);
  r.Int("ests", &s.ests, /*required=*/true, 1, 4096);
  r.Int("minWorkers", &s.minWorkers, false, 1, 4096);
  r.Int("maxWorkers", &s.maxWorkers, false, 1, 4096);
  r.StringList("gpuTypes", &s.gpuTypes);
  r.Int("priority", &s.priority, false, -1000000, 1000000);
  r.Bool("suspend", &s.suspend);
  if (const nlohmann::json* t = r.Object("training")) {
    auto training = ParseTrainingArgs(*t, r.FieldPath("training"));
    if (!training.ok()) return training.status();
    s.training = *training;
  }
  if (const nlohmann::json* c = r.Object("checkpoint")) {
    FieldReader cr(*c, r.FieldPath("checkpoint"));
    cr.String("claimName", &s.checkpoint.claimName);
    cr.String("mountPath", &s.checkpoint.mountPath);
    if (!cr.ok()) return cr.status();
    if (!IsNormalAbsolutePath(s.checkpoint.mountPath)) {
      return absl::InvalidArgumentError(
          cr.FieldPath("mountPath") +
          ": must be an absolute path without empty, \".\" or \"..\" components or a trailing "
          "slash");
    }
    if (!s.checkpoint.claimName.empty() && !IsDns1123Subdomain(s.checkpoint.claimName)) {
      return absl::InvalidArgumentError(cr.FieldPath("claimName") + ": not a DNS-1123 subdomain");
    }
  }
  if (const nlohmann::json* o = r.Object("output")) {
    ES_ASSIGN_OR_RETURN(s.output, ParseOutputSpec(*o, r.FieldPath("output")));
  }
  if (const nlohmann::json* c = r.Object("certificate")) {
    FieldReader cr(*c, r.FieldPath("certificate"));
    cr.Int("everySteps", &s.certificate.everySteps, false, 0, kMaxSteps);
    ES_RETURN_IF_ERROR(cr.status());
  }
  if (const nlohmann::json* w = r.Object("worker")) {
    std::vector<std::string> operatorMountPaths = {kShmMountPath};
    if (!s.checkpoint.claimName.empty()) operatorMountPaths.push_back(s.checkpoint.mountPath);
    ES_RETURN_IF_ERROR(
        ParseWorkerPodSettings(*w, r.FieldPath("worker"), operatorMountPaths, &s.worker));
  }
  if (const nlohmann::json* p = r.Object("runPolicy")) {
    FieldReader pr(*p, r.FieldPath("runPolicy"));
    pr.Int("backoffLimit", &s.runPolicy.backoffLimit, false, 0, 1000);
    ES_RETURN_IF_ERROR(pr.status());
  }
  if (!r.ok()) return r.status();
  if (s.maxWorkers == 0) s.maxWorkers = s.ests;
  if (s.minWorkers > s.maxWorkers) {
    r.Fail("minWorkers",
           absl::StrCat("must be <= maxWorkers (", s.maxWorkers, "), got ", s.minWorkers));
  }
  if (s.maxWorkers > s.ests) {
    r.Fail("maxWorkers", absl::StrCat("must be <= ests (", s.ests, "), got ", s.maxWorkers));
  }
  for (size_t i = 0; i < s.gpuTypes.size(); ++i) {
    if (!IsKnownGpuType(s.gpuTypes[i])) {
      r.Fail(absl::StrCat("gpuTypes[", i, "]"), "unknown GPU type \"" + s.gpuTypes[i] + "\"");
    }
  }
  if (!r.ok()) return r.status();
  // The files a job names are read (and written) by every worker pod: they
  // must be in the job's volumes, not on one node's disk or in the image.
  std::vector<VolumePath> paths;
  if (s.training.model == "file") {
    paths.push_back({r.FieldPath("training.modelFile"), s.training.modelFile});
  }
  if (!s.training.data.empty()) {  // read-only volumes do: the worker only reads it
    paths.push_back({r.FieldPath("training.data"), s.training.data});
  }
  if (!s.output.path.empty()) {
    paths.push_back({r.FieldPath("output.path"), s.output.path, /*needsWritable=*/true});
  }
  ES_RETURN_IF_ERROR(CheckPathsInVolumes(paths, s.worker.volumes, r.FieldPath("worker.volumes")));
  return s;
}

nlohmann::json ToJson(const TrainingArgs& t) {
  return {{"model", t.model},
          {"modelFile", t.modelFile},
          {"dataset", t.dataset},
          {"data", t.data},
          {"normalizeMean", t.normalizeMean},
          {"normalizeStd", t.normalizeStd},
          {"steps", t.steps},
          {"seed", t.seed},
          {"batchPerEst", t.batchPerEst},
          {"optimizer", t.optimizer},
          {"learningRate", t.learningRate},
          {"momentum", t.momentum},
          {"weightDecay", t.weightDecay},
          {"lrSchedule", t.lrSchedule},
          {"warmupSteps", t.warmupSteps},
          {"augment", t.augment},
          {"checkpointEvery", t.checkpointEvery}};
}

nlohmann::json ToJson(const OutputSpec& o) {
  return {{"path", o.path}, {"everyCheckpoint", o.everyCheckpoint}};
}

nlohmann::json ToJson(const JobSpec& s) {
  nlohmann::json j = {
      {"image", s.image},
      {"ests", s.ests},
      {"minWorkers", s.minWorkers},
      {"maxWorkers", s.maxWorkers},
      {"gpuTypes", s.gpuTypes},
      {"priority", s.priority},
      {"training", ToJson(s.training)},
      {"checkpoint",
       {{"claimName", s.checkpoint.claimName}, {"mountPath", s.checkpoint.mountPath}}},
      {"output", ToJson(s.output)},
      {"certificate", {{"everySteps", s.certificate.everySteps}}},
      {"runPolicy", {{"backoffLimit", s.runPolicy.backoffLimit}}},
      {"suspend", s.suspend}};
  nlohmann::json secrets = nlohmann::json::array();
  for (const std::string& name : s.worker.imagePullSecrets) secrets.push_back({{"name", name}});
  nlohmann::json volumes = nlohmann::json::array();
  for (const JobVolume& v : s.worker.volumes) {
    volumes.push_back({{"name", v.name},
                       {"claimName", v.claimName},
                       {"mountPath", v.mountPath},
                       {"readOnly", v.readOnly}});
  }
  j["worker"] = {{"resources", {{"requests", s.worker.requests}, {"limits", s.worker.limits}}},
                 {"tolerations", s.worker.tolerations},
                 {"nodeSelector", s.worker.nodeSelector},
                 {"imagePullSecrets", secrets},
                 {"serviceAccountName", s.worker.serviceAccountName},
                 {"shmSize", s.worker.shmSize},
                 {"volumes", volumes}};
  return j;
}

}  // namespace easyscale
