// File: common/src/testing/cel_rules.h
//
// The CEL rules (x-kubernetes-validations) our schemas use, implemented in C++
// and looked up by their exact rule text. No CEL library exists on these
// machines; a rule added to a schema without an implementation here makes
// StructuralSchema::Create fail, so the tests cannot skip it silently.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "easyscale/common/status.h"

namespace easyscale::schematest {

// True when `rule` has an implementation.
bool IsKnownCelRule(const std::string& rule);
// True when `rule` reads oldSelf: the API server evaluates it on updates only.
bool IsTransitionRule(const std::string& rule);

// Evaluates `rule` for `self` (and `old_self` for transition rules). An error
// is a CEL runtime error, e.g. "no such key: maxWorkers".
StatusOr<bool> EvaluateCelRule(const std::string& rule, const nlohmann::json& self,
                               const nlohmann::json* old_self);

}  // namespace easyscale::schematest
