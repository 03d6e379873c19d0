// File: operator/src/testing/discovery.h
//
// What discovery-driven clients (kubectl, helm, the Python client) read
// before anything else: /version and the legacy discovery documents (/api,
// /apis and each group version) with short names, categories and verbs.
#pragma once

#include <httplib.h>

namespace easyscale::op::testing {

// The Kubernetes release the test API server answers as (that of the
// project's kubectl: kubectl warns beyond one minor version of skew).
inline constexpr const char* kServedMajor = "1";
inline constexpr const char* kServedMinor = "35";

void InstallDiscovery(httplib::Server& svr);

}  // namespace easyscale::op::testing
