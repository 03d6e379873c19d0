#include "easyscale/common/json_fields.h"

#include <cmath>

#include "absl/strings/str_join.h"

namespace easyscale {

FieldReader::FieldReader(const nlohmann::json& obj, std::string path)
    : obj_(obj), path_(std::move(path)) {
  if (!obj_.is_object()) {
    status_ = absl::InvalidArgumentError((path_.empty() ? std::string("document") : path_) +
                                         ": must be an object, got " + obj_.type_name());
  }
}

std::string FieldReader::FieldPath(const std::string& name) const {
  return path_.empty() ? name : path_ + "." + name;
}

void FieldReader::Fail(const std::string& name, const std::string& message) {
  if (status_.ok()) status_ = absl::InvalidArgumentError(FieldPath(name) + ": " + message);
}

const nlohmann::json* FieldReader::Find(const char* name, bool required) {
  if (!status_.ok()) return nullptr;
  const auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) {
    if (required) Fail(name, "is required");
    return nullptr;
  }
  return &*it;
}

void FieldReader::Int(const char* name, int64_t* out, bool required, int64_t min, int64_t max) {
  const nlohmann::json* v = Find(name, required);
  if (v == nullptr) return;
  int64_t value = 0;
  if (v->is_number_integer()) {
    value = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9.0e18) {
    value = static_cast<int64_t>(v->get<double>());
  } else {
    return Fail(name, std::string("must be an integer, got ") + v->type_name());
  }
  if (value < min) return Fail(name, absl::StrCat("must be >= ", min, ", got ", value));
  if (value > max) return Fail(name, absl::StrCat("must be <= ", max, ", got ", value));
  *out = value;
}

void FieldReader::Int(const char* name, int* out, bool required, int64_t min, int64_t max) {
  int64_t value = *out;
  Int(name, &value, required, min, max);
  if (status_.ok()) *out = static_cast<int>(value);
}

void FieldReader::Double(const char* name, double* out, bool required, double min, double max) {
  // JSON has no NaN or infinity: nlohmann writes them as null. A null number
  // is therefore an error, never "absent, take the default".
  if (status_.ok() && obj_.contains(name) && obj_[name].is_null()) {
    return Fail(name, "must be a finite number, got null (NaN and infinity are written as null)");
  }
  const nlohmann::json* v = Find(name, required);
  if (v == nullptr) return;
  if (!v->is_number()) return Fail(name, std::string("must be a number, got ") + v->type_name());
  const double value = v->get<double>();
  if (!std::isfinite(value)) return Fail(name, "must be finite");
  if (value < min) return Fail(name, absl::StrCat("must be >= ", min, ", got ", value));
  if (value > max) return Fail(name, absl::StrCat("must be <= ", max, ", got ", value));
  *out = value;
}

void FieldReader::Bool(const char* name, bool* out, bool required) {
  const nlohmann::json* v = Find(name, required);
  if (v == nullptr) return;
  if (!v->is_boolean()) return Fail(name, std::string("must be a boolean, got ") + v->type_name());
  *out = v->get<bool>();
}

void FieldReader::String(const char* name, std::string* out, bool required) {
  const nlohmann::json* v = Find(name, required);
  if (v == nullptr) return;
  if (!v->is_string()) return Fail(name, std::string("must be a string, got ") + v->type_name());
  if (required && v->get_ref<const std::string&>().empty()) return Fail(name, "must not be empty");
  *out = v->get<std::string>();
}

void FieldReader::Enum(const char* name, std::string* out, const std::vector<std::string>& allowed,
                       bool required) {
  std::string value = *out;
  String(name, &value, required);
  if (!status_.ok()) return;
  for (const auto& a : allowed) {
    if (a == value) {
      *out = value;
      return;
    }
  }
  Fail(name, "must be one of " + absl::StrJoin(allowed, ", ") + ", got \"" + value + "\"");
}

void FieldReader::StringList(const char* name, std::vector<std::string>* out, bool required) {
  const nlohmann::json* v = Find(name, required);
  if (v == nullptr) return;
  if (!v->is_array()) return Fail(name, std::string("must be a list, got ") + v->type_name());
  std::vector<std::string> values;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      return Fail(absl::StrCat(name, "[", i, "]"), "must be a string");
    }
    values.push_back((*v)[i].get<std::string>());
  }
  *out = std::move(values);
}

void FieldReader::IntList(const char* name, std::vector<int>* out, bool required, int64_t min,
                          int64_t max) {
  const nlohmann::json* v = Find(name, required);
  if (v == nullptr) return;
  if (!v->is_array()) return Fail(name, std::string("must be a list, got ") + v->type_name());
  std::vector<int> values;
  for (size_t i = 0; i < v->size(); ++i) {
    const auto& e = (*v)[i];
    const std::string item = absl::StrCat(name, "[", i, "]");
    if (!e.is_number_integer()) return Fail(item, "must be an integer");
    const int64_t x = e.get<int64_t>();
    if (x < min || x > max) return Fail(item, absl::StrCat("out of range [", min, ", ", max, "]"));
    values.push_back(static_cast<int>(x));
  }
  *out = std::move(values);
}

void FieldReader::DoubleList(const char* name, std::vector<double>* out, bool required) {
  const nlohmann::json* v = Find(name, required);
  if (v == nullptr) return;
  if (!v->is_array()) return Fail(name, std::string("must be a list, got ") + v->type_name());
  std::vector<double> values;
  for (size_t i = 0; i < v->size(); ++i) {
    const auto& e = (*v)[i];
    // nlohmann writes NaN and infinity as null.
    if (!e.is_number() || !std::isfinite(e.get<double>())) {
      return Fail(absl::StrCat(name, "[", i, "]"), "must be a finite number");
    }
    values.push_back(e.get<double>());
  }
  *out = std::move(values);
}

void FieldReader::StringMap(const char* name, std::map<std::string, std::string>* out,
                            bool required) {
  const nlohmann::json* v = Find(name, required);
  if (v == nullptr) return;
  if (!v->is_object()) return Fail(name, std::string("must be an object, got ") + v->type_name());
  std::map<std::string, std::string> values;
  for (const auto& [key, value] : v->items()) {
    if (!value.is_string()) return Fail(absl::StrCat(name, ".", key), "must be a string");
    values[key] = value.get<std::string>();
  }
  *out = std::move(values);
}

bool FieldReader::Has(const char* name) const {
  if (!obj_.is_object()) return false;
  const auto it = obj_.find(name);
  return it != obj_.end() && !it->is_null();
}

const nlohmann::json* FieldReader::Object(const char* name, bool required) {
  const nlohmann::json* v = Find(name, required);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    Fail(name, std::string("must be an object, got ") + v->type_name());
    return nullptr;
  }
  return v;
}

}  // namespace easyscale
