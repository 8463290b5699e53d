#include "common/log.h"

#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "spdlog/formatter.h"
#include "spdlog/logger.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace baton {
namespace {

constexpr const char* kLevelNames[] = {"trace", "debug",    "info", "warn",
                                       "error", "critical", "off"};

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  return static_cast<spdlog::level::level_enum>(static_cast<int>(level));
}

LogLevel FromSpdlog(spdlog::level::level_enum level) {
  return static_cast<LogLevel>(static_cast<int>(level));
}

// RFC 3339 in UTC with milliseconds: sortable, and what log collectors parse.
std::string Timestamp(absl::Time ts) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", ts, absl::UTCTimeZone());
}

void AppendJsonString(std::string_view raw, std::string* out) {
  // JSON text is UTF-8: a message quoting invalid bytes gets U+FFFD in their place.
  const std::string sanitized = IsValidUtf8(raw) ? std::string() : SanitizeUtf8(raw);
  const std::string_view text = sanitized.empty() ? raw : sanitized;
  out->push_back('"');
  for (const char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out->append(absl::StrFormat("\\u%04x", static_cast<unsigned char>(c)));
        } else {
          out->push_back(c);  // UTF-8 passes through; JSON allows it unescaped
        }
    }
  }
  out->push_back('"');
}

absl::Time ToAbsl(spdlog::log_clock::time_point t) { return absl::FromChrono(t); }

// Both formats are ours rather than spdlog patterns so that text and JSON carry the
// same timestamp form and the JSON escaping is tested (log_test.cc).
class LineFormatter : public spdlog::formatter {
 public:
  explicit LineFormatter(LogFormat format) : format_(format) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string_view text(msg.payload.data(), msg.payload.size());
    const std::string_view logger(msg.logger_name.data(), msg.logger_name.size());
    const LogLevel level = FromSpdlog(msg.level);
    std::string line =
        format_ == LogFormat::kJson
            ? FormatJsonLogLine(ToAbsl(msg.time), level, logger, text)
            : absl::StrCat(Timestamp(ToAbsl(msg.time)), " ", kLevelNames[static_cast<int>(level)],
                           " ", std::string(text));
    line.push_back('\n');
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(format_);
  }

 private:
  LogFormat format_;
};

std::mutex& LoggerMutex() {
  static std::mutex mu;
  return mu;
}

std::shared_ptr<spdlog::logger>& LoggerSlot() {
  static std::shared_ptr<spdlog::logger> logger;
  return logger;
}

std::shared_ptr<spdlog::logger> MakeLogger(std::string_view name, LogLevel level,
                                           LogFormat format) {
  auto logger = std::make_shared<spdlog::logger>(std::string(name),
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_formatter(std::make_unique<LineFormatter>(format));
  logger->set_level(ToSpdlog(level));
  // Every line reaches stderr at once: tests and supervisors read it as it comes.
  logger->flush_on(spdlog::level::trace);
  return logger;
}

std::shared_ptr<spdlog::logger> Logger() {
  std::lock_guard<std::mutex> lock(LoggerMutex());
  auto& slot = LoggerSlot();
  if (slot == nullptr) slot = MakeLogger("baton", LogLevel::kInfo, LogFormat::kText);
  return slot;
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  if (lower == "warning") return LogLevel::kWarn;
  for (int i = 0; i <= static_cast<int>(LogLevel::kOff); ++i) {
    if (lower == kLevelNames[i]) return static_cast<LogLevel>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--log-level must be trace, debug, info, warn, error, critical or off, got '",
                   std::string(name), "'"));
}

absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--log-format must be text or json, got '", std::string(name), "'"));
}

void InitLogging(std::string_view name, LogLevel level, LogFormat format) {
  auto logger = MakeLogger(name, level, format);
  std::lock_guard<std::mutex> lock(LoggerMutex());
  LoggerSlot() = std::move(logger);
}

bool LogEnabled(LogLevel level) { return Logger()->should_log(ToSpdlog(level)); }

void LogMessage(LogLevel level, std::string_view message) {
  Logger()->log(ToSpdlog(level), spdlog::string_view_t(message.data(), message.size()));
}

std::string FormatJsonLogLine(absl::Time ts, LogLevel level, std::string_view logger,
                              std::string_view message) {
  std::string out = "{\"ts\":";
  AppendJsonString(Timestamp(ts), &out);
  out.append(",\"level\":");
  AppendJsonString(kLevelNames[static_cast<int>(level)], &out);
  out.append(",\"logger\":");
  AppendJsonString(logger, &out);
  out.append(",\"msg\":");
  AppendJsonString(message, &out);
  out.push_back('}');
  return out;
}

}  // namespace baton
