// File: operator/src/controller/certificate_history.h
//
// A job's certificate history (control_protocol.h Certificate): the ConfigMap
// "<job>-certificate", owned by the job (the garbage collector removes it with
// the job), whose key "certificates" holds one line per certified step in step
// order, the newest kCertificateHistory of them, exactly as
// `easyscale-worker local` prints them for the same job:
//   certificate step=20 digest=6c24ef5f...
//   certificate step=40 digest=0d2ef74d...
// so a cluster run and a laptop run compare with diff:
//   kubectl get configmap <job>-certificate -o jsonpath='{.data.certificates}'
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "easyscale/common/control_protocol.h"
#include "easyscale/common/status.h"

namespace easyscale::op {

// 1000 lines of about 100 bytes: 100 KB of the ConfigMap's 1 MiB.
inline constexpr size_t kCertificateHistory = 1000;
inline constexpr char kCertificatesKey[] = "certificates";

std::string CertificateConfigMapName(const std::string& job);

// The history's lines in step order; the error names the ConfigMap key and
// quotes the bad line.
StatusOr<std::vector<Certificate>> ParseCertificateHistory(const std::string& text);
std::string FormatCertificateHistory(const std::vector<Certificate>& history);

struct CertificateMerge {
  std::vector<Certificate> history;
  bool changed = false;
  // Certificates for a step the history holds with another digest (kept
  // out): the training was not deterministic. One message each.
  std::vector<std::string> conflicts;
};

// Appends the certificates of `incoming` (step order) whose steps are above
// the history's newest and keeps the newest `limit`.
CertificateMerge MergeCertificates(std::vector<Certificate> history,
                                   const std::vector<Certificate>& incoming,
                                   size_t limit = kCertificateHistory);

}  // namespace easyscale::op
