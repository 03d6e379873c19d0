#include "easyscale/common/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "easyscale/common/checks.h"

namespace easyscale {
namespace {

Status ParseInt64(const std::string& name, const std::string& text, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    return absl::InvalidArgumentError("--" + name + ": expected an integer, got \"" + text + "\"");
  }
  *out = v;
  return absl::OkStatus();
}

Status ParseInt64InRange(const std::string& name, const std::string& text, int64_t min, int64_t max,
                         int64_t* out) {
  if (!ParseInt64(name, text, out).ok() || *out < min || *out > max) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": must be an integer in [", min,
                                                   ", ", max, "], got \"", text, "\""));
  }
  return absl::OkStatus();
}

// Accepts finite numbers only: strtod also reads "inf", "nan" and overflows
// such as 1e999 to infinity, which no flag means.
Status ParseDouble(const std::string& name, const std::string& text, double* out) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') {
    return absl::InvalidArgumentError("--" + name + ": expected a number, got \"" + text + "\"");
  }
  if (!std::isfinite(x)) {
    return absl::InvalidArgumentError("--" + name + ": must be a finite number, got \"" + text +
                                      "\"");
  }
  *out = x;
  return absl::OkStatus();
}

std::string DefaultText(double v) {
  std::ostringstream d;
  d << v;
  return d.str();
}

}  // namespace

void FlagSet::Add(Flag f) { flags_.push_back(std::move(f)); }

void FlagSet::Int(const std::string& name, int64_t* out, const std::string& help) {
  Add({name, help, std::to_string(*out), false,
       [name, out](const std::string& v) { return ParseInt64(name, v, out); }});
}

void FlagSet::Int(const std::string& name, int* out, const std::string& help) {
  Add({name, help, std::to_string(*out), false, [name, out](const std::string& v) {
         int64_t x = 0;
         Status s = ParseInt64(name, v, &x);
         if (!s.ok()) return s;
         if (x < INT32_MIN || x > INT32_MAX) {
           return absl::InvalidArgumentError("--" + name + ": " + v + " is out of range");
         }
         *out = static_cast<int>(x);
         return absl::OkStatus();
       }});
}

void FlagSet::Int(const std::string& name, int* out, const std::string& help, int min, int max) {
  Add({name, help, std::to_string(*out), false, [name, out, min, max](const std::string& v) {
         int64_t x = 0;
         Status s = ParseInt64InRange(name, v, min, max, &x);
         if (s.ok()) *out = static_cast<int>(x);
         return s;
       }});
}

void FlagSet::Int(const std::string& name, int64_t* out, const std::string& help, int64_t min,
                  int64_t max) {
  Add({name, help, std::to_string(*out), false, [name, out, min, max](const std::string& v) {
         return ParseInt64InRange(name, v, min, max, out);
       }});
}

void FlagSet::StringList(const std::string& name, std::vector<std::string>* out,
                         const std::string& help) {
  std::string defaults;
  for (const auto& v : *out) defaults += (defaults.empty() ? "" : ",") + v;
  auto replaced = std::make_shared<bool>(false);
  Add({name, help + " (repeatable)", defaults, false, [name, out, replaced](const std::string& v) {
         if (v.empty()) return absl::InvalidArgumentError("--" + name + ": must not be empty");
         if (!*replaced) out->clear();
         *replaced = true;
         out->push_back(v);
         return absl::OkStatus();
       }});
}

void FlagSet::Double(const std::string& name, double* out, const std::string& help) {
  Add({name, help, DefaultText(*out), false,
       [name, out](const std::string& v) { return ParseDouble(name, v, out); }});
}

void FlagSet::Double(const std::string& name, double* out, const std::string& help, double min,
                     double max, bool min_exclusive) {
  Add({name, help, DefaultText(*out), false,
       [name, out, min, max, min_exclusive](const std::string& v) {
         double x = 0;
         const bool parsed = ParseDouble(name, v, &x).ok();
         const bool above_min = min_exclusive ? x > min : x >= min;
         if (!parsed || !above_min || x > max) {
           return absl::InvalidArgumentError(absl::StrCat("--", name, ": must be a number in ",
                                                          min_exclusive ? "(" : "[", min, ", ", max,
                                                          "], got \"", v, "\""));
         }
         *out = x;
         return absl::OkStatus();
       }});
}

void FlagSet::DoubleList(const std::string& name, std::vector<double>* out,
                         const std::string& help) {
  std::string defaults;
  for (double v : *out) defaults += (defaults.empty() ? "" : ",") + DefaultText(v);
  Add({name, help, defaults, false, [name, out](const std::string& v) {
         std::vector<double> values;
         size_t begin = 0;
         for (;;) {
           const size_t comma = v.find(',', begin);
           double x = 0;
           ES_RETURN_IF_ERROR(ParseDouble(name, v.substr(begin, comma - begin), &x));
           values.push_back(x);
           if (comma == std::string::npos) break;
           begin = comma + 1;
         }
         *out = std::move(values);
         return absl::OkStatus();
       }});
}

void FlagSet::String(const std::string& name, std::string* out, const std::string& help) {
  Add({name, help, *out, false, [name, out](const std::string& v) {
         if (v.empty()) return absl::InvalidArgumentError("--" + name + ": must not be empty");
         *out = v;
         return absl::OkStatus();
       }});
}

void FlagSet::Choice(const std::string& name, std::string* out, const std::string& help,
                     std::vector<std::string> choices) {
  std::string listed, wanted;
  for (size_t i = 0; i < choices.size(); ++i) {
    listed += (i == 0 ? "" : " | ") + choices[i];
    wanted += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  Add({name, absl::StrCat(help, " (", listed, ")"), *out, false,
       [name, out, choices = std::move(choices), wanted](const std::string& v) {
         for (const std::string& c : choices) {
           if (v == c) {
             *out = v;
             return absl::OkStatus();
           }
         }
         return absl::InvalidArgumentError("--" + name + ": want " + wanted + ", got \"" + v +
                                           "\"");
       }});
}

void FlagSet::Bool(const std::string& name, bool* out, const std::string& help) {
  Add({name, help, *out ? "true" : "false", true, [name, out](const std::string& v) {
         if (v == "true" || v == "1" || v == "on") {
           *out = true;
         } else if (v == "false" || v == "0" || v == "off") {
           *out = false;
         } else {
           return absl::InvalidArgumentError(
               "--" + name + ": must be on or off (true or false), got \"" + v + "\"");
         }
         return absl::OkStatus();
       }});
}

StatusOr<std::vector<std::string>> FlagSet::Parse(int argc, char** argv, int first) {
  std::vector<std::string> positional;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      return positional;
    }
    if (arg.rfind("--", 0) != 0) {
      positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const Flag* flag = nullptr;
    for (const Flag& f : flags_) {
      if (f.name == name) flag = &f;
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError("unknown flag --" + name + " (see --help)");
    }
    if (!has_value) {
      const bool word_follows =
          i + 1 < argc && (std::string(argv[i + 1]) == "on" || std::string(argv[i + 1]) == "off");
      if (flag->is_bool && word_follows) {
        value = argv[++i];
      } else if (flag->is_bool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError("--" + name + ": missing value");
      }
    }
    Status s = flag->set(value);
    if (!s.ok()) return s;
  }
  return positional;
}

std::string FlagSet::Help() const {
  std::ostringstream os;
  os << "usage: " << usage_ << "\n\nflags:\n";
  for (const Flag& f : flags_) {
    os << "  --" << f.name << (f.is_bool ? "" : " VALUE") << "\n      " << f.help;
    if (!f.default_text.empty()) os << " (default: " << f.default_text << ")";
    os << "\n";
  }
  return os.str();
}

}  // namespace easyscale
