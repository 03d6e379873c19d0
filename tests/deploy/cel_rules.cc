#include "cel_rules.h"

#include <functional>
#include <map>

#include "easyscale/common/checks.h"

namespace easyscale::deploytest {
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

}  // namespace easyscale::deploytest
