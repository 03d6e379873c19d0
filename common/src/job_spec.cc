#include "easyscale/common/job_spec.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "absl/strings/str_join.h"
#include "easyscale/common/checks.h"
#include "easyscale/common/json_fields.h"

namespace easyscale {

const std::vector<std::string>& KnownGpuTypes() {
  static const std::vector<std::string> kTypes = {"h200", "h100", "a100", "a10",
                                                  "l4",   "v100", "t4",   "cpu"};
  return kTypes;
}

bool IsKnownGpuType(const std::string& type) {
  const auto& t = KnownGpuTypes();
  return std::find(t.begin(), t.end(), type) != t.end();
}

StatusOr<TrainingArgs> ParseTrainingArgs(const nlohmann::json& j, const std::string& path) {
  TrainingArgs t;
  FieldReader r(j, path);
  r.String("model", &t.model);
  r.String("dataset", &t.dataset);
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
  constexpr int64_t kMaxSteps = 100000000;
  ES_RETURN_IF_ERROR(one_of("model", t.model, {"mlp", "cnn"}));
  ES_RETURN_IF_ERROR(one_of("dataset", t.dataset, {"mnist", "synthetic"}));
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
    if (s.checkpoint.mountPath.empty() || s.checkpoint.mountPath[0] != '/') {
      return absl::InvalidArgumentError(cr.FieldPath("mountPath") + ": must be an absolute path");
    }
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
  return s;
}

nlohmann::json ToJson(const TrainingArgs& t) {
  return {{"model", t.model},
          {"dataset", t.dataset},
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
       {{"claimName", s.checkpoint.claimName}, {"mountPath", s.checkpoint.mountPath}}}};
  return j;
}

}  // namespace easyscale
