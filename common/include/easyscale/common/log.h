// File: easyscale/common/log.h
//
// Structured logs: one JSON object per line on stderr, with a level, a component
// and key/value fields.
//   LogInfo("worker", "checkpoint saved", {{"step", 40}, {"path", p}});
// Level threshold: SetLogLevel(), or the EASYSCALE_LOG_LEVEL environment variable
// (debug, info, warn, error), read once at first use.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace easyscale {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "debug" | "info" | "warn" | "error"; false if unknown.
bool ParseLogLevel(std::string_view text, LogLevel* level);

void Log(LogLevel level, std::string_view component, std::string_view message,
         const nlohmann::json& fields = nlohmann::json::object());

inline void LogDebug(std::string_view c, std::string_view m,
                     const nlohmann::json& f = nlohmann::json::object()) {
  Log(LogLevel::kDebug, c, m, f);
}
inline void LogInfo(std::string_view c, std::string_view m,
                    const nlohmann::json& f = nlohmann::json::object()) {
  Log(LogLevel::kInfo, c, m, f);
}
inline void LogWarn(std::string_view c, std::string_view m,
                    const nlohmann::json& f = nlohmann::json::object()) {
  Log(LogLevel::kWarn, c, m, f);
}
inline void LogError(std::string_view c, std::string_view m,
                     const nlohmann::json& f = nlohmann::json::object()) {
  Log(LogLevel::kError, c, m, f);
}

}  // namespace easyscale
