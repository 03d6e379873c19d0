// The certificate history's lines and their bounded merge.
#include "controller/certificate_history.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace easyscale::op {

std::string CertificateConfigMapName(const std::string& job) { return job + "-certificate"; }

StatusOr<std::vector<Certificate>> ParseCertificateHistory(const std::string& text) {
  std::vector<Certificate> history;
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(text, '\n', absl::SkipEmpty()))) {
    StatusOr<Certificate> c = ParseCertificateLine(line);
    if (!c.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("data.", kCertificatesKey, ": ", c.status().message()));
    }
    if (!history.empty() && c->step <= history.back().step) {
      return absl::InvalidArgumentError(absl::StrCat("data.", kCertificatesKey, ": step ", c->step,
                                                     " after step ", history.back().step,
                                                     ": steps must increase"));
    }
    history.push_back(*std::move(c));
  }
  return history;
}

std::string FormatCertificateHistory(const std::vector<Certificate>& history) {
  std::string text;
  for (const Certificate& c : history) absl::StrAppend(&text, CertificateLine(c), "\n");
  return text;
}

CertificateMerge MergeCertificates(std::vector<Certificate> history,
                                   const std::vector<Certificate>& incoming, size_t limit) {
  CertificateMerge m;
  for (const Certificate& c : incoming) {
    if (history.empty() || c.step > history.back().step) {
      history.push_back(c);
      m.changed = true;
      continue;
    }
    for (const Certificate& held : history) {
      if (held.step == c.step && held.digest != c.digest) {
        m.conflicts.push_back(absl::StrCat("step ", c.step, " was certified with digest ",
                                           held.digest, " and now with ", c.digest,
                                           ": the training is not deterministic"));
      }
    }
  }
  if (history.size() > limit) {
    history.erase(history.begin(), history.end() - static_cast<std::ptrdiff_t>(limit));
    m.changed = true;
  }
  m.history = std::move(history);
  return m;
}

}  // namespace easyscale::op
