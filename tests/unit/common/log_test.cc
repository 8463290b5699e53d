#include "common/log.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>

#include "absl/time/time.h"
#include "common/utf8.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace baton {
namespace {

// The JSON line is read back with a real JSON parser (the oracle), not compared as text.
TEST(LogJsonTest, MessagesAreEscapedAndReadBackExactly) {
  const absl::Time ts = absl::FromUnixMillis(1764773401123);
  const std::string messages[] = {
      "plain",
      "quote \" backslash \\ slash /",
      "newline\nreturn\rtab\t",
      std::string("control \x01\x1f and nul ") + std::string(1, '\0') + " end",
      "utf-8: \xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80",
      "{\"looks\": \"like json\"}",
  };
  for (const std::string& message : messages) {
    const std::string line = FormatJsonLogLine(ts, LogLevel::kWarn, "baton-router", message);
    ASSERT_EQ(line.find('\n'), std::string::npos) << "one object per line: " << line;
    const nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j.at("msg").get<std::string>(), message);
    EXPECT_EQ(j.at("level"), "warn");
    EXPECT_EQ(j.at("logger"), "baton-router");
    absl::Time parsed;
    std::string error;
    ASSERT_TRUE(absl::ParseTime(absl::RFC3339_full, j.at("ts").get<std::string>(), &parsed, &error))
        << error;
    EXPECT_EQ(parsed, ts);
  }
}

TEST(LogJsonTest, InvalidUtf8BecomesReplacementCharacters) {
  const std::string message = "bad \xff\xfe bytes";
  const std::string line = FormatJsonLogLine(absl::UnixEpoch(), LogLevel::kInfo, "x", message);
  const nlohmann::json j = nlohmann::json::parse(line);  // throws on invalid UTF-8
  EXPECT_EQ(j.at("msg").get<std::string>(), SanitizeUtf8(message));
}

TEST(LogLevelTest, ParsesEveryNameAndRejectsOthers) {
  EXPECT_EQ(*ParseLogLevel("trace"), LogLevel::kTrace);
  EXPECT_EQ(*ParseLogLevel("WARNING"), LogLevel::kWarn);
  EXPECT_EQ(*ParseLogLevel("off"), LogLevel::kOff);
  const auto bad = ParseLogLevel("verbose");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--log-level"), std::string::npos);
  EXPECT_FALSE(ParseLogFormat("xml").ok());
}

// What the process writes on stderr: one JSON object per line, below-level lines dropped.
TEST(LogProcessTest, JsonLinesOnStderrAtTheChosenLevel) {
  std::FILE* capture = std::tmpfile();
  ASSERT_NE(capture, nullptr);
  std::fflush(stderr);
  const int saved = dup(2);
  ASSERT_GE(dup2(fileno(capture), 2), 0);
  InitLogging("log-test", LogLevel::kInfo, LogFormat::kJson);
  LogDebug("hidden %d", 1);
  LogInfo("shown %d \"%s\"", 2, "quoted");
  LogError("second line");
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  InitLogging("log-test", LogLevel::kInfo, LogFormat::kText);

  std::rewind(capture);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), capture)) > 0;) text.append(buf, n);
  std::fclose(capture);
  std::istringstream lines(text);
  std::string line;
  std::vector<nlohmann::json> objects;
  while (std::getline(lines, line)) objects.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(objects.size(), 2u) << text;
  EXPECT_EQ(objects[0].at("msg"), "shown 2 \"quoted\"");
  EXPECT_EQ(objects[0].at("level"), "info");
  EXPECT_EQ(objects[0].at("logger"), "log-test");
  EXPECT_EQ(objects[1].at("msg"), "second line");
  EXPECT_EQ(objects[1].at("level"), "error");
}

}  // namespace
}  // namespace baton
