#include "easyscale/common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace easyscale {
namespace {

LogLevel InitialLevel() {
  LogLevel level = LogLevel::kInfo;
  if (const char* env = std::getenv("EASYSCALE_LOG_LEVEL")) ParseLogLevel(env, &level);
  return level;
}

std::atomic<int>& LevelStore() {
  static std::atomic<int> level{static_cast<int>(InitialLevel())};
  return level;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

}  // namespace

void SetLogLevel(LogLevel level) { LevelStore().store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(LevelStore().load()); }

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (text == LevelName(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

void Log(LogLevel level, std::string_view component, std::string_view message,
         const nlohmann::json& fields) {
  if (static_cast<int>(level) < LevelStore().load()) return;
  nlohmann::json line = nlohmann::json::object();
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  line["ts"] = std::chrono::duration<double>(now).count();
  line["level"] = LevelName(level);
  line["component"] = component;
  line["msg"] = message;
  if (fields.is_object()) {
    for (const auto& [k, v] : fields.items()) line[k] = v;
  }
  const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
}

}  // namespace easyscale
