// File: easyscale/operator/kube_time.h
//
// Kubernetes timestamps: metav1.Time is RFC 3339 in UTC with seconds
// ("2026-01-02T15:04:05Z"), metav1.MicroTime adds microseconds (Lease renewTime).
#pragma once

#include <chrono>
#include <string>

#include "easyscale/common/status.h"

namespace easyscale::op {

using WallClock = std::chrono::system_clock;

std::string FormatTime(WallClock::time_point t);
std::string FormatMicroTime(WallClock::time_point t);
inline std::string NowTime() { return FormatTime(WallClock::now()); }
// Accepts both forms (and any fraction of a second).
StatusOr<WallClock::time_point> ParseTime(const std::string& text);

}  // namespace easyscale::op
