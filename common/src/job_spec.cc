#include "easyscale/common/job_spec.h"

#include <algorithm>

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
  r.Enum("model", &t.model, {"mlp", "cnn"});
  r.Enum("dataset", &t.dataset, {"mnist", "synthetic"});
  r.Int("steps", &t.steps, false, 1, 100000000);
  int64_t seed = static_cast<int64_t>(t.seed);
  r.Int("seed", &seed, false, 0);
  t.seed = static_cast<uint64_t>(seed);
  r.Int("batchPerEst", &t.batchPerEst, false, 1, 65536);
  r.Enum("optimizer", &t.optimizer, {"sgd", "adam"});
  r.Double("learningRate", &t.learningRate, false, 0.0, 10.0);
  r.Double("momentum", &t.momentum, false, 0.0, 0.999999);
  r.Double("weightDecay", &t.weightDecay, false, 0.0, 1.0);
  r.Enum("lrSchedule", &t.lrSchedule, {"constant", "step", "cosine"});
  r.Int("warmupSteps", &t.warmupSteps, false, 0, 100000000);
  r.Bool("augment", &t.augment);
  r.Int("checkpointEvery", &t.checkpointEvery, false, 0, 100000000);
  if (!r.ok()) return r.status();
  ES_RETURN_IF_ERROR(ValidateTrainingArgs(t, path));
  return t;
}

Status ValidateTrainingArgs(const TrainingArgs& t, const std::string& path) {
  const nlohmann::json j = ToJson(t);
  FieldReader r(j, path);
  if (t.model != "mlp" && t.model != "cnn") r.Fail("model", "must be one of mlp, cnn");
  if (t.dataset != "mnist" && t.dataset != "synthetic") {
    r.Fail("dataset", "must be one of mnist, synthetic");
  }
  if (t.optimizer != "sgd" && t.optimizer != "adam")
    r.Fail("optimizer", "must be one of sgd, adam");
  if (t.steps < 1) r.Fail("steps", "must be >= 1");
  if (t.batchPerEst < 1) r.Fail("batchPerEst", "must be >= 1");
  if (!(t.learningRate > 0.0)) r.Fail("learningRate", "must be > 0");
  if (t.warmupSteps >= t.steps) r.Fail("warmupSteps", "must be < steps");
  return r.status();
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
