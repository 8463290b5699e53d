// Process logging on stderr through spdlog: levels, timestamps, and a text or JSON line
// format chosen with --log-level and --log-format (common/cli_setup.h adds both). stdout
// stays for the banner lines that scripts and tests parse, so nothing here writes there.
//
//   LogInfo("%s: loading %s", name, path);   // absl::StrFormat syntax, checked at compile time
//
// Text:  2026-12-03T14:50:01.123Z info baton-router: waiting for the worker at ...
// JSON:  {"ts":"2026-12-03T14:50:01.123Z","level":"info","logger":"baton-router","msg":"..."}
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace baton {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };
enum class LogFormat { kText, kJson };

// "trace", "debug", "info", "warn" (or "warning"), "error", "critical", "off".
absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name);
// "text" or "json".
absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name);

// Sets the process's logger: `name` is the program ("baton-router"), shown as `logger` in
// JSON. Until it is called, lines go out as text at info under the name "baton".
void InitLogging(std::string_view name, LogLevel level, LogFormat format);

bool LogEnabled(LogLevel level);
void LogMessage(LogLevel level, std::string_view message);

// One JSON log line without the newline; exposed for tests.
std::string FormatJsonLogLine(absl::Time ts, LogLevel level, std::string_view logger,
                              std::string_view message);

template <typename... Args>
void Log(LogLevel level, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (LogEnabled(level)) LogMessage(level, absl::StrFormat(format, args...));
}
template <typename... Args>
void LogDebug(const absl::FormatSpec<Args...>& format, const Args&... args) {
  Log(LogLevel::kDebug, format, args...);
}
template <typename... Args>
void LogInfo(const absl::FormatSpec<Args...>& format, const Args&... args) {
  Log(LogLevel::kInfo, format, args...);
}
template <typename... Args>
void LogWarn(const absl::FormatSpec<Args...>& format, const Args&... args) {
  Log(LogLevel::kWarn, format, args...);
}
template <typename... Args>
void LogError(const absl::FormatSpec<Args...>& format, const Args&... args) {
  Log(LogLevel::kError, format, args...);
}

}  // namespace baton
