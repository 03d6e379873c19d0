// Query parameters and DeleteOptions, checked as kube-apiserver checks them.
#include "request_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace easyscale::op::testing {

using nlohmann::json;

StatusOr<std::optional<bool>> BoolParam(const httplib::Request& req, const std::string& name) {
  if (!req.has_param(name)) return std::optional<bool>();
  const std::string v = req.get_param_value(name);
  for (const char* yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (v == yes) return std::optional<bool>(true);
  }
  for (const char* no : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (v == no) return std::optional<bool>(false);
  }
  return absl::FailedPreconditionError(
      absl::StrCat(name, ": invalid value \"", v, "\": want a boolean (true or false)"));
}

StatusOr<WriteOptions> WriteOptionsOf(const httplib::Request& req) {
  const std::string fieldValidation = req.get_param_value("fieldValidation");
  WriteOptions w;
  if (fieldValidation == "Ignore") {
    w.fieldValidation = FieldValidation::kIgnore;
  } else if (fieldValidation == "Warn") {
    w.fieldValidation = FieldValidation::kWarn;
  } else if (fieldValidation == "Strict") {
    w.fieldValidation = FieldValidation::kStrict;
  } else if (!fieldValidation.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("fieldValidation: Unsupported value: \"", fieldValidation,
                     "\": supported values: \"Ignore\", \"Warn\", \"Strict\""));
  }
  for (size_t i = 0; i < req.get_param_value_count("dryRun"); ++i) {
    const std::string v = req.get_param_value("dryRun", i);
    if (v != "All") {
      return absl::FailedPreconditionError(
          absl::StrCat("dryRun: Unsupported value: \"", v, "\": supported values: \"All\""));
    }
    w.dryRun = true;
  }
  return w;
}

StatusOr<DeleteOptions> DeleteOptionsOf(const httplib::Request& req, WriteOptions* w) {
  json body = json::parse(req.body, nullptr, false);
  if (!body.is_object()) body = json::object();  // no body, or not DeleteOptions
  return DeleteOptionsIn(body, req, w);
}

StatusOr<DeleteOptions> DeleteOptionsIn(const json& body, const httplib::Request& req,
                                        WriteOptions* w) {
  DeleteOptions d;
  const json grace = body.value("gracePeriodSeconds", json());
  if (grace.is_number_integer()) d.gracePeriodSeconds = grace.get<int>();
  if (req.has_param("gracePeriodSeconds") &&
      (!absl::SimpleAtoi(req.get_param_value("gracePeriodSeconds"), &d.gracePeriodSeconds) ||
       d.gracePeriodSeconds < 0)) {
    return absl::FailedPreconditionError("gracePeriodSeconds: not a non-negative integer");
  }
  const json dryRun = body.value("dryRun", json::array());
  if (!dryRun.empty()) {
    if (dryRun != json::array({"All"})) {
      return absl::FailedPreconditionError("dryRun: Unsupported value: supported values: \"All\"");
    }
    w->dryRun = true;
  }
  json policy = body.value("propagationPolicy", json(""));
  if (req.has_param("propagationPolicy")) policy = req.get_param_value("propagationPolicy");
  if (policy != "" && policy != "Orphan" && policy != "Background" && policy != "Foreground") {
    return absl::FailedPreconditionError(
        "propagationPolicy: Unsupported value: supported values: \"Orphan\", \"Background\", "
        "\"Foreground\"");
  }
  if (policy == "Orphan" || body.value("orphanDependents", json()) == true) {
    d.propagation = DeleteOptions::Propagation::kOrphan;
  } else if (policy == "Foreground") {
    d.propagation = DeleteOptions::Propagation::kForeground;
  }
  return d;
}

}  // namespace easyscale::op::testing
