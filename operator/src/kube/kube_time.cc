// RFC 3339 formatting and parsing in UTC.
#include "easyscale/operator/kube_time.h"

#include <cstdio>
#include <ctime>

namespace easyscale::op {
namespace {

std::string Format(WallClock::time_point t, bool micro) {
  const auto secs = std::chrono::time_point_cast<std::chrono::seconds>(t);
  const std::time_t tt = WallClock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  if (micro) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t - secs).count();
    n += std::snprintf(buf + n, sizeof(buf) - n, ".%06lld", static_cast<long long>(us));
  }
  return std::string(buf, n) + "Z";
}

}  // namespace

std::string FormatTime(WallClock::time_point t) { return Format(t, false); }
std::string FormatMicroTime(WallClock::time_point t) { return Format(t, true); }

StatusOr<WallClock::time_point> ParseTime(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return absl::InvalidArgumentError(absl::StrCat("not an RFC 3339 time: \"", text, "\""));
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  WallClock::time_point t = WallClock::from_time_t(timegm(&tm));
  size_t i = static_cast<size_t>(consumed);
  if (i < text.size() && text[i] == '.') {
    long long frac = 0;
    int digits = 0;
    for (++i; i < text.size() && isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (digits < 6) frac = frac * 10 + (text[i] - '0'), ++digits;
    }
    while (digits < 6) frac *= 10, ++digits;
    t += std::chrono::microseconds(frac);
  }
  if (i >= text.size() || (text[i] != 'Z' && text[i] != 'z')) {
    return absl::InvalidArgumentError(absl::StrCat("not a UTC RFC 3339 time: \"", text, "\""));
  }
  return t;
}

}  // namespace easyscale::op
