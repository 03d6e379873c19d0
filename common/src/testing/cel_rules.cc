#include "cel_rules.h"

#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include "easyscale/common/checks.h"

namespace easyscale::schematest {
namespace {

using Rule = std::function<StatusOr<bool>(const nlohmann::json&, const nlohmann::json*)>;

// CEL's field selection: a missing key is a runtime error, as in the API server.
StatusOr<nlohmann::json> Select(const nlohmann::json& self, const char* key) {
  const auto it = self.find(key);
  if (it == self.end()) return absl::InvalidArgumentError(std::string("no such key: ") + key);
  return *it;
}

// CEL compares int with int and double with double; our rules only compare ints.
StatusOr<int64_t> SelectInt(const nlohmann::json& self, const char* key) {
  ES_ASSIGN_OR_RETURN(nlohmann::json v, Select(self, key));
  if (!v.is_number_integer()) {
    return absl::InvalidArgumentError(std::string("no such overload: ") + key + " is not int");
  }
  return v.get<int64_t>();
}

// `!has(self.opt) || self.a <= self.b`; `a` or `b` may be `opt`.
Rule UnlessAbsentLessEqual(const char* opt, const char* a, const char* b) {
  return [=](const nlohmann::json& self, const nlohmann::json*) -> StatusOr<bool> {
    if (!self.contains(opt)) return true;
    ES_ASSIGN_OR_RETURN(int64_t x, SelectInt(self, a));
    ES_ASSIGN_OR_RETURN(int64_t y, SelectInt(self, b));
    return x <= y;
  };
}

Rule Compare(const char* a, const char* b, bool strict) {
  return [=](const nlohmann::json& self, const nlohmann::json*) -> StatusOr<bool> {
    ES_ASSIGN_OR_RETURN(int64_t x, SelectInt(self, a));
    ES_ASSIGN_OR_RETURN(int64_t y, SelectInt(self, b));
    return strict ? x < y : x <= y;
  };
}

StatusOr<std::string> SelectString(const nlohmann::json& self, const char* key) {
  ES_ASSIGN_OR_RETURN(nlohmann::json v, Select(self, key));
  if (!v.is_string()) {
    return absl::InvalidArgumentError(std::string("no such overload: ") + key + " is not string");
  }
  return v.get<std::string>();
}

// CEL's `a.startsWith(b)`.
bool StartsWith(const std::string& a, const std::string& b) { return a.rfind(b, 0) == 0; }

// `(a + '/').startsWith(b + '/')`: path a is b or lies below it.
bool Within(const std::string& a, const std::string& b) { return StartsWith(a + "/", b + "/"); }

// The mountPath of every item of the list `self`; a missing one is CEL's runtime error.
StatusOr<std::vector<std::string>> MountPaths(const nlohmann::json& list) {
  std::vector<std::string> paths;
  for (const auto& v : list) {
    ES_ASSIGN_OR_RETURN(std::string p, SelectString(v, "mountPath"));
    paths.push_back(std::move(p));
  }
  return paths;
}

// `self.all(a, self.all(b, a.name == b.name || !(a.mountPath + '/').startsWith(b.mountPath +
// '/')))`
StatusOr<bool> MountPathsNeitherEqualNorNested(const nlohmann::json& self, const nlohmann::json*) {
  ES_ASSIGN_OR_RETURN(std::vector<std::string> paths, MountPaths(self));
  for (size_t a = 0; a < self.size(); ++a) {
    for (size_t b = 0; b < self.size(); ++b) {
      ES_ASSIGN_OR_RETURN(std::string name_a, SelectString(self[a], "name"));
      ES_ASSIGN_OR_RETURN(std::string name_b, SelectString(self[b], "name"));
      if (name_a != name_b && Within(paths[a], paths[b])) return false;
    }
  }
  return true;
}

// `has(self.worker.volumes) && self.worker.volumes.exists(v, (path +
//  '/').startsWith(v.mountPath + '/'))`, with `!v.readOnly &&` when `writable`.
StatusOr<bool> InAVolume(const nlohmann::json& self, const std::string& path, bool writable) {
  ES_ASSIGN_OR_RETURN(nlohmann::json worker, Select(self, "worker"));
  if (!worker.contains("volumes")) return false;
  for (const nlohmann::json& v : worker["volumes"]) {
    if (writable && v.value("readOnly", false)) continue;
    ES_ASSIGN_OR_RETURN(std::string mount, SelectString(v, "mountPath"));
    if (Within(path, mount)) return true;
  }
  return false;
}

// `self.training.model != 'file' || (has(self.worker.volumes) &&
//  self.worker.volumes.exists(v, (self.training.modelFile + '/').startsWith(v.mountPath + '/')))`
StatusOr<bool> ModelFileInAVolume(const nlohmann::json& self, const nlohmann::json*) {
  ES_ASSIGN_OR_RETURN(nlohmann::json training, Select(self, "training"));
  ES_ASSIGN_OR_RETURN(std::string model, SelectString(training, "model"));
  if (model != "file") return true;
  ES_ASSIGN_OR_RETURN(std::string file, SelectString(training, "modelFile"));
  return InAVolume(self, file, /*writable=*/false);
}

// `!has(self.training.data) || self.training.data == '' || (has(self.worker.volumes) &&
//  self.worker.volumes.exists(v, (self.training.data + '/').startsWith(v.mountPath + '/')))`
StatusOr<bool> DataInAVolume(const nlohmann::json& self, const nlohmann::json*) {
  ES_ASSIGN_OR_RETURN(nlohmann::json training, Select(self, "training"));
  if (!training.contains("data")) return true;
  ES_ASSIGN_OR_RETURN(std::string data, SelectString(training, "data"));
  if (data.empty()) return true;
  return InAVolume(self, data, /*writable=*/false);
}

// `!has(self.output) || !has(self.output.path) || self.output.path == '' ||
//  (has(self.worker.volumes) && self.worker.volumes.exists(v, !v.readOnly &&
//  (self.output.path + '/').startsWith(v.mountPath + '/')))`
StatusOr<bool> OutputInAWritableVolume(const nlohmann::json& self, const nlohmann::json*) {
  if (!self.contains("output") || !self["output"].contains("path")) return true;
  ES_ASSIGN_OR_RETURN(std::string path, SelectString(self["output"], "path"));
  if (path.empty()) return true;
  return InAVolume(self, path, /*writable=*/true);
}

// `!has(self.checkpoint.claimName) || self.checkpoint.claimName == '' ||
//  !has(self.worker.volumes) || self.worker.volumes.all(v, <neither within the other>)`
StatusOr<bool> VolumesOffTheCheckpointMount(const nlohmann::json& self, const nlohmann::json*) {
  ES_ASSIGN_OR_RETURN(nlohmann::json checkpoint, Select(self, "checkpoint"));
  if (!checkpoint.contains("claimName")) return true;
  ES_ASSIGN_OR_RETURN(std::string claim, SelectString(checkpoint, "claimName"));
  ES_ASSIGN_OR_RETURN(nlohmann::json worker, Select(self, "worker"));
  if (claim.empty() || !worker.contains("volumes")) return true;
  ES_ASSIGN_OR_RETURN(std::string mount, SelectString(checkpoint, "mountPath"));
  ES_ASSIGN_OR_RETURN(std::vector<std::string> paths, MountPaths(worker["volumes"]));
  return std::none_of(paths.begin(), paths.end(),
                      [&](const std::string& p) { return Within(p, mount) || Within(mount, p); });
}

// `self.a == '' || self.b == 'value'` on strings.
Rule EmptyOrEquals(const char* a, const char* b, const char* value) {
  return [=](const nlohmann::json& self, const nlohmann::json*) -> StatusOr<bool> {
    ES_ASSIGN_OR_RETURN(nlohmann::json x, Select(self, a));
    ES_ASSIGN_OR_RETURN(nlohmann::json y, Select(self, b));
    if (!x.is_string() || !y.is_string()) return absl::InvalidArgumentError("no such overload");
    return x.get<std::string>().empty() || y.get<std::string>() == value;
  };
}

// `size(self.a) == 0 || size(self.b) != 0` on lists.
Rule EmptyOrNotEmpty(const char* a, const char* b) {
  return [=](const nlohmann::json& self, const nlohmann::json*) -> StatusOr<bool> {
    ES_ASSIGN_OR_RETURN(nlohmann::json x, Select(self, a));
    ES_ASSIGN_OR_RETURN(nlohmann::json y, Select(self, b));
    if (!x.is_array() || !y.is_array()) return absl::InvalidArgumentError("no such overload");
    return x.empty() || !y.empty();
  };
}

const std::map<std::string, Rule>& Rules() {
  static const std::map<std::string, Rule> kRules = {
      {"self.minWorkers <= self.ests", Compare("minWorkers", "ests", false)},
      {"!has(self.maxWorkers) || self.minWorkers <= self.maxWorkers",
       UnlessAbsentLessEqual("maxWorkers", "minWorkers", "maxWorkers")},
      {"!has(self.maxWorkers) || self.maxWorkers <= self.ests",
       UnlessAbsentLessEqual("maxWorkers", "maxWorkers", "ests")},
      {"self.warmupSteps < self.steps", Compare("warmupSteps", "steps", true)},
      {"self.training.model != 'file' || (has(self.worker.volumes) && "
       "self.worker.volumes.exists(v, (self.training.modelFile + '/').startsWith(v.mountPath + "
       "'/')))",
       ModelFileInAVolume},
      {"!has(self.training.data) || self.training.data == '' || (has(self.worker.volumes) && "
       "self.worker.volumes.exists(v, (self.training.data + '/').startsWith(v.mountPath + "
       "'/')))",
       DataInAVolume},
      {"!has(self.output) || !has(self.output.path) || self.output.path == '' || "
       "(has(self.worker.volumes) && self.worker.volumes.exists(v, !v.readOnly && "
       "(self.output.path + '/').startsWith(v.mountPath + '/')))",
       OutputInAWritableVolume},
      {"!has(self.checkpoint.claimName) || self.checkpoint.claimName == '' || "
       "!has(self.worker.volumes) || self.worker.volumes.all(v, !(v.mountPath + "
       "'/').startsWith(self.checkpoint.mountPath + '/') && !(self.checkpoint.mountPath + "
       "'/').startsWith(v.mountPath + '/'))",
       VolumesOffTheCheckpointMount},
      {"self.all(a, self.all(b, a.name == b.name || !(a.mountPath + '/').startsWith(b.mountPath "
       "+ '/')))",
       MountPathsNeitherEqualNorNested},
      {"self != 'shm' && self != 'checkpoint'",
       [](const nlohmann::json& self, const nlohmann::json*) -> StatusOr<bool> {
         return self != "shm" && self != "checkpoint";
       }},
      {"!(self + '/').startsWith('/dev/shm/') && !'/dev/shm/'.startsWith(self + '/')",
       [](const nlohmann::json& self, const nlohmann::json*) -> StatusOr<bool> {
         const std::string path = self.get<std::string>();
         return !Within(path, "/dev/shm") && !Within("/dev/shm", path);
       }},
      {"self.data == '' || self.dataset == 'mnist'", EmptyOrEquals("data", "dataset", "mnist")},
      {"size(self.normalizeMean) == 0 || size(self.normalizeStd) != 0",
       EmptyOrNotEmpty("normalizeMean", "normalizeStd")},
      {"size(self.normalizeStd) == 0 || size(self.normalizeMean) != 0",
       EmptyOrNotEmpty("normalizeStd", "normalizeMean")},
      {"self == oldSelf",
       [](const nlohmann::json& self, const nlohmann::json* old) -> StatusOr<bool> {
         return old == nullptr || self == *old;
       }},
  };
  return kRules;
}

}  // namespace

bool IsKnownCelRule(const std::string& rule) { return Rules().count(rule) > 0; }

bool IsTransitionRule(const std::string& rule) { return rule.find("oldSelf") != std::string::npos; }

StatusOr<bool> EvaluateCelRule(const std::string& rule, const nlohmann::json& self,
                               const nlohmann::json* old_self) {
  const auto it = Rules().find(rule);
  if (it == Rules().end())
    return absl::UnimplementedError("no implementation of CEL rule: " + rule);
  return it->second(self, old_self);
}

}  // namespace easyscale::schematest
