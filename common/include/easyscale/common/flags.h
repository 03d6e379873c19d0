// File: easyscale/common/flags.h
//
// Command-line flags of the form --name=value or --name value, with typed
// targets and one-line errors naming the flag:
//   FlagSet flags("easyscale-worker local");
//   flags.Int("ests", &ests, "number of ESTs (logical workers)");
//   StatusOr<std::vector<std::string>> rest = flags.Parse(argc, argv);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "easyscale/common/status.h"

namespace easyscale {

class FlagSet {
 public:
  explicit FlagSet(std::string usage) : usage_(std::move(usage)) {}

  void Int(const std::string& name, int64_t* out, const std::string& help);
  void Int(const std::string& name, int* out, const std::string& help);
  // An integer that must lie in [min, max].
  void Int(const std::string& name, int* out, const std::string& help, int min, int max);
  void Int(const std::string& name, int64_t* out, const std::string& help, int64_t min,
           int64_t max);
  // A finite number: "inf", "nan" and overflows (1e999) are errors.
  void Double(const std::string& name, double* out, const std::string& help);
  // A finite number in [min, max], or in (min, max] with min_exclusive (durations
  // that must be positive).
  void Double(const std::string& name, double* out, const std::string& help, double min, double max,
              bool min_exclusive = false);
  // Comma-separated finite numbers ("0.5,0.5,0.5"); a use replaces the list.
  void DoubleList(const std::string& name, std::vector<double>* out, const std::string& help);
  // A value given explicitly must not be empty.
  void String(const std::string& name, std::string* out, const std::string& help);
  // One of `choices`; the help text lists them.
  void Choice(const std::string& name, std::string* out, const std::string& help,
              std::vector<std::string> choices);
  // A flag without a value (also accepts --name=true|false|on|off, or
  // --name on|off as a separate word).
  void Bool(const std::string& name, bool* out, const std::string& help);
  // Repeatable: each use appends; the first use replaces the default list.
  void StringList(const std::string& name, std::vector<std::string>* out, const std::string& help);

  // Parses argv[first..]; returns the positional arguments. --help sets
  // help_requested() and stops.
  StatusOr<std::vector<std::string>> Parse(int argc, char** argv, int first = 1);
  bool help_requested() const { return help_; }
  std::string Help() const;

 private:
  struct Flag {
    std::string name, help, default_text;
    bool is_bool = false;
    std::function<Status(const std::string&)> set;
  };
  void Add(Flag f);
  std::vector<Flag> flags_;
  std::string usage_;
  bool help_ = false;
};

}  // namespace easyscale
