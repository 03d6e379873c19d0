// File: easyscale/common/json_fields.h
//
// Reads typed fields out of untrusted JSON and names the offending field in the
// first error it meets:
//   FieldReader r(obj, "spec");
//   r.Int("ests", &spec.ests, /*required=*/true, 1);
//   r.String("image", &spec.image, /*required=*/true);
//   if (!r.ok()) return r.status();   // "spec.ests: must be >= 1, got 0"
// Absent optional fields (or null ones) leave the output untouched, so defaults
// stay put; numbers are the exception: a null number is an error (it is how a
// NaN or infinity was written) and so is a non-finite one.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale {

class FieldReader {
 public:
  // `path` prefixes field names in messages ("spec" -> "spec.ests").
  FieldReader(const nlohmann::json& obj, std::string path);

  void Int(const char* name, int64_t* out, bool required = false,
           int64_t min = std::numeric_limits<int64_t>::min(),
           int64_t max = std::numeric_limits<int64_t>::max());
  void Int(const char* name, int* out, bool required = false,
           int64_t min = std::numeric_limits<int>::min(),
           int64_t max = std::numeric_limits<int>::max());
  void Double(const char* name, double* out, bool required = false,
              double min = -std::numeric_limits<double>::infinity(),
              double max = std::numeric_limits<double>::infinity());
  void Bool(const char* name, bool* out, bool required = false);
  void String(const char* name, std::string* out, bool required = false);
  // A string that must be one of `allowed`.
  void Enum(const char* name, std::string* out, const std::vector<std::string>& allowed,
            bool required = false);
  void StringList(const char* name, std::vector<std::string>* out, bool required = false);
  void IntList(const char* name, std::vector<int>* out, bool required = false,
               int64_t min = std::numeric_limits<int>::min(),
               int64_t max = std::numeric_limits<int>::max());
  // A list of finite numbers.
  void DoubleList(const char* name, std::vector<double>* out, bool required = false);
  // An object of string values (labels, selectors, resource lists).
  void StringMap(const char* name, std::map<std::string, std::string>* out, bool required = false);
  // True when the field is present and not null.
  bool Has(const char* name) const;
  // Returns the sub-object (or nullptr if absent/invalid) and records errors.
  const nlohmann::json* Object(const char* name, bool required = false);

  // Records a cross-field error, e.g. Fail("minWorkers", "must be <= maxWorkers").
  void Fail(const std::string& name, const std::string& message);

  std::string FieldPath(const std::string& name) const;
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

 private:
  const nlohmann::json* Find(const char* name, bool required);

  const nlohmann::json& obj_;
  std::string path_;
  Status status_;
};

}  // namespace easyscale
