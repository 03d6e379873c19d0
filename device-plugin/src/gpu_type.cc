#include "gpu_type.h"

#include <cctype>

#include "easyscale/common/job_spec.h"

namespace easyscale::dp {

std::string GpuTypeFromName(const std::string& name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Words split on anything but letters, digits and '.'.
  std::string word;
  auto known = [&](const std::string& w) { return w != "cpu" && IsKnownGpuType(w); };
  for (size_t i = 0; i <= lower.size(); ++i) {
    const char c = i < lower.size() ? lower[i] : ' ';
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.') {
      word += c;
      continue;
    }
    if (known(word)) return word;
    word.clear();
  }
  std::string label;
  for (char c : lower) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
    label += ok ? c : '-';
  }
  if (label.size() > 63) label.resize(63);
  return label.empty() ? "unknown" : label;
}

}  // namespace easyscale::dp
