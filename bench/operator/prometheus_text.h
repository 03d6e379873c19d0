// File: bench/operator/prometheus_text.h
//
// What the bench reads of the operator's /metrics (Prometheus text format):
// a histogram's count, sum and cumulative buckets summed over its label sets,
// so that two scrapes tell what happened between them.
//   const Histogram before = ReadHistogram(text0, "workqueue_queue_duration_seconds");
//   const Histogram during = ReadHistogram(text1, "...").Minus(before);
//   during.Mean(); during.QuantileBound(0.99);
#pragma once

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

namespace easyscale::op::testing {

struct Histogram {
  double count = 0;
  double sum = 0;
  std::map<double, double> buckets;  // upper bound (le) -> observations at or below it

  Histogram Minus(const Histogram& earlier) const {
    Histogram d{count - earlier.count, sum - earlier.sum, buckets};
    for (auto& [le, n] : d.buckets) {
      auto it = earlier.buckets.find(le);
      if (it != earlier.buckets.end()) n -= it->second;
    }
    return d;
  }
  double Mean() const { return count > 0 ? sum / count : NAN; }
  // The upper bound of the bucket that holds the q-quantile (+Inf if beyond the last).
  double QuantileBound(double q) const {
    if (count <= 0) return NAN;
    for (const auto& [le, n] : buckets) {
      if (n >= q * count) return le;
    }
    return INFINITY;
  }
};

// The value of a sample line "name{labels} value" or "name value" when its
// name is `name`, NAN when it is another's. `labels` gets the braces' text.
inline double SampleOf(const std::string& line, const std::string& name, std::string* labels) {
  if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size()) return NAN;
  size_t valueAt = name.size();
  labels->clear();
  if (line[valueAt] == '{') {
    const size_t close = line.find('}', valueAt);
    if (close == std::string::npos) return NAN;
    *labels = line.substr(valueAt + 1, close - valueAt - 1);
    valueAt = close + 1;
  }
  if (valueAt >= line.size() || line[valueAt] != ' ') return NAN;
  return std::strtod(line.c_str() + valueAt + 1, nullptr);
}

inline Histogram ReadHistogram(const std::string& text, const std::string& name) {
  Histogram h;
  std::istringstream lines(text);
  std::string line;
  std::string labels;
  while (std::getline(lines, line)) {
    if (double v = SampleOf(line, name + "_count", &labels); !std::isnan(v)) h.count += v;
    if (double v = SampleOf(line, name + "_sum", &labels); !std::isnan(v)) h.sum += v;
    if (double v = SampleOf(line, name + "_bucket", &labels); !std::isnan(v)) {
      const size_t le = labels.find("le=\"");
      if (le == std::string::npos) continue;
      const std::string bound = labels.substr(le + 4, labels.find('"', le + 4) - le - 4);
      h.buckets[bound == "+Inf" ? INFINITY : std::strtod(bound.c_str(), nullptr)] += v;
    }
  }
  return h;
}

// The sum over label sets of a counter or gauge named `name`.
inline double ReadSum(const std::string& text, const std::string& name) {
  double total = 0;
  std::istringstream lines(text);
  std::string line;
  std::string labels;
  while (std::getline(lines, line)) {
    if (double v = SampleOf(line, name, &labels); !std::isnan(v)) total += v;
  }
  return total;
}

}  // namespace easyscale::op::testing
