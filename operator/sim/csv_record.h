// File: operator/sim/csv_record.h (internal)
//
// One record of the simulator's CSV inputs (traces, the paper's workload and
// step-time profiles): typed field readers whose errors name the source, line,
// field number and field name.
#pragma once

#include <charconv>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "easyscale/common/job_spec.h"
#include "easyscale/common/status.h"

namespace easyscale::sim {

// 315360000 rather than StrCat's 3.1536e+08.
inline std::string Plain(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

// Reads the fields of one CSV record; every error names the line and field.
// fields[0] is the record type; field i counts from 1 after it.
class Record {
 public:
  // `recordTypeColumn`: false where the file has no record-type column and
  // fields[0] is a placeholder, so messages number the file's own columns.
  Record(std::vector<std::string> fields, std::string where, bool recordTypeColumn = true)
      : fields_(std::move(fields)), where_(std::move(where)), base_(recordTypeColumn ? 1 : 0) {}

  Status Arity(const std::vector<const char*>& names) {
    names_ = names;
    if (fields_.size() != names.size() + 1) {
      const std::string what = base_ == 1
                                   ? absl::StrCat("'", fields_[0], "' record needs ", names.size(),
                                                  " fields after the record type")
                                   : absl::StrCat("a row needs ", names.size(), " fields");
      return Error(
          absl::StrCat(what, " (", absl::StrJoin(names, ","), "), got ", fields_.size() - 1));
    }
    return absl::OkStatus();
  }
  // Field i counts from 1, after the record type.
  const std::string& Text(int i) const { return fields_[i]; }
  Status Int(int i, int lo, int hi, int* out) const {
    const std::string& s = fields_[i];
    const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || *out < lo || *out > hi) {
      return FieldError(i,
                        absl::StrCat("must be an integer in [", lo, ", ", hi, "], got '", s, "'"));
    }
    return absl::OkStatus();
  }
  Status Number(int i, double lo, double hi, double* out) const {
    const std::string& s = fields_[i];
    const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || !(*out >= lo && *out <= hi)) {
      return FieldError(
          i, absl::StrCat("must be a number in [", Plain(lo), ", ", Plain(hi), "], got '", s, "'"));
    }
    return absl::OkStatus();
  }
  Status Name(int i) const {
    const std::string& s = fields_[i];
    if (s.empty() || s.find_first_of(" \t|=") != std::string::npos) {
      return FieldError(
          i, absl::StrCat("must be a non-empty name without spaces, '|' or '=', got '", s, "'"));
    }
    return absl::OkStatus();
  }
  Status FieldError(int i, const std::string& msg) const {
    return Error(absl::StrCat("field ", i + base_, " (", names_[i - 1], ") ", msg));
  }
  Status Error(const std::string& msg) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": ", msg));
  }

 private:
  std::vector<std::string> fields_;
  std::vector<const char*> names_;
  std::string where_;
  int base_ = 1;
};

// Field i must name a GPU type the system knows.
inline Status GpuType(const Record& r, int i, const std::string& type) {
  if (!IsKnownGpuType(type)) {
    return r.FieldError(i, absl::StrCat("unknown GPU type '", type,
                                        "' (known: ", absl::StrJoin(KnownGpuTypes(), ", "), ")"));
  }
  return absl::OkStatus();
}

}  // namespace easyscale::sim
