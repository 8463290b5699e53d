#include "tools/bench_serve_sse.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::tools {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Feeds `stream` split at the given sizes (cycled) and collects the events.
std::vector<std::string> Events(std::string_view stream, std::vector<size_t> pieces) {
  SseParser parser;
  std::vector<std::string> events;
  size_t at = 0;
  for (size_t i = 0; at < stream.size(); ++i) {
    const size_t n = std::min(pieces[i % pieces.size()], stream.size() - at);
    absl::Status status = parser.Feed(stream.substr(at, n), [&](std::string_view data) {
      events.emplace_back(data);
      return absl::OkStatus();
    });
    EXPECT_TRUE(status.ok()) << status;
    at += n;
  }
  return events;
}

constexpr std::string_view kStream =
    ": keep-alive comment\n"
    "data: {\"a\":1}\n\n"
    "event: message\r\n"
    "id: 7\r\n"
    "data: line one\r\n"
    "data:line two\r\n\r\n"
    "data: cr only\r\r"
    "\n\n\n"    // blank lines without data dispatch nothing
    "data\n\n"  // a field without a colon: empty data
    "data: [DONE]\n\n"
    "data: never ended";

TEST(SseParserTest, ParsesFieldsCommentsAndLineEndings) {
  EXPECT_THAT(Events(kStream, {kStream.size()}),
              ElementsAre("{\"a\":1}", "line one\nline two", "cr only", "", "[DONE]"));
}

TEST(SseParserTest, AnySplitGivesTheSameEvents) {
  const std::vector<std::string> whole = Events(kStream, {kStream.size()});
  EXPECT_EQ(Events(kStream, {1}), whole);  // byte by byte
  EXPECT_EQ(Events(kStream, {2}), whole);
  EXPECT_EQ(Events(kStream, {3, 1, 7}), whole);
  for (size_t split = 1; split < kStream.size(); ++split) {
    SseParser parser;
    std::vector<std::string> events;
    auto collect = [&](std::string_view data) {
      events.emplace_back(data);
      return absl::OkStatus();
    };
    ASSERT_TRUE(parser.Feed(kStream.substr(0, split), collect).ok());
    ASSERT_TRUE(parser.Feed(kStream.substr(split), collect).ok());
    EXPECT_EQ(events, whole) << "split at " << split;
  }
}

TEST(SseParserTest, CrlfSplitAcrossReadsIsOneLineEnd) {
  // Were the LF after a read-ending CR taken for a blank line, "a" would be dispatched
  // alone before "b".
  SseParser parser;
  std::vector<std::string> events;
  auto collect = [&](std::string_view data) {
    events.emplace_back(data);
    return absl::OkStatus();
  };
  ASSERT_TRUE(parser.Feed("data: a\r", collect).ok());
  ASSERT_TRUE(parser.Feed("\ndata: b\r\n\r\n", collect).ok());
  EXPECT_THAT(events, ElementsAre("a\nb"));
}

TEST(SseParserTest, StopsAtTheCallbacksError) {
  SseParser parser;
  int calls = 0;
  absl::Status status = parser.Feed("data: 1\n\ndata: 2\n\n", [&](std::string_view) {
    ++calls;
    return absl::InternalError("boom");
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(status.message(), "boom");
}

TEST(SseParserTest, RefusesAnOversizedEvent) {
  SseParser parser(/*max_event_bytes=*/64);
  const std::string big = "data: " + std::string(100, 'x');
  absl::Status status = parser.Feed(big, [](std::string_view) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
}

BenchClock::time_point At(double s) {
  return BenchClock::time_point{} +
         std::chrono::duration_cast<BenchClock::duration>(std::chrono::duration<double>(s));
}

TEST(OpenAiStreamTest, CompletionChunksUsageAndDone) {
  OpenAiStream stream(OpenAiApi::kCompletions, At(0));
  ASSERT_TRUE(stream.OnEvent(R"({"choices":[{"index":0,"text":"Hel"}]})", At(0.5)).ok());
  ASSERT_TRUE(stream.OnEvent(R"({"choices":[{"index":0,"text":""}]})", At(0.55)).ok());
  ASSERT_TRUE(stream.OnEvent(R"({"choices":[{"index":0,"text":"lo"}]})", At(0.6)).ok());
  ASSERT_TRUE(
      stream.OnEvent(R"({"choices":[{"index":0,"text":"!","finish_reason":"length"}]})", At(0.75))
          .ok());
  ASSERT_TRUE(stream
                  .OnEvent(R"({"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":3,
                     "total_tokens":14,"prompt_tokens_details":{"cached_tokens":8}}})",
                           At(0.76))
                  .ok());
  EXPECT_FALSE(stream.done());
  ASSERT_TRUE(stream.OnEvent("[DONE]", At(0.77)).ok());
  EXPECT_TRUE(stream.done());
  // Nothing after [DONE] counts.
  ASSERT_TRUE(stream.OnEvent(R"({"choices":[{"index":0,"text":"late"}]})", At(5)).ok());

  RequestResult r;
  stream.Finish(At(0.8), &r);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.5);
  // The empty-text chunk carries no content, so it is no inter-token gap.
  EXPECT_THAT(r.itl_s, ElementsAre(DoubleNear(0.1, 1e-9), DoubleNear(0.15, 1e-9)));
  EXPECT_DOUBLE_EQ(r.e2el_s, 0.8);
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(r.prompt_tokens, 11);
  EXPECT_EQ(r.cached_tokens, 8);
}

TEST(OpenAiStreamTest, ChatDeltasAndNoUsage) {
  OpenAiStream stream(OpenAiApi::kChat, At(0));
  ASSERT_TRUE(
      stream.OnEvent(R"({"choices":[{"index":0,"delta":{"role":"assistant"}}]})", At(0.1)).ok());
  ASSERT_TRUE(
      stream.OnEvent(R"({"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]})", At(0.3))
          .ok());
  ASSERT_TRUE(
      stream.OnEvent(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})", At(0.4)).ok());
  // A completions-style "text" means nothing in a chat stream.
  ASSERT_TRUE(stream.OnEvent(R"({"choices":[{"index":0,"text":"x","delta":{}}]})", At(0.45)).ok());
  ASSERT_TRUE(
      stream.OnEvent(R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})", At(0.5))
          .ok());
  ASSERT_TRUE(stream.OnEvent("[DONE]", At(0.5)).ok());
  RequestResult r;
  stream.Finish(At(0.5), &r);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.3);
  EXPECT_EQ(r.output_tokens, 2);  // content-bearing chunks, with no usage to go by
  EXPECT_EQ(r.prompt_tokens, -1);
  EXPECT_EQ(r.cached_tokens, -1);
}

TEST(OpenAiStreamTest, ErrorEventsAndBadJsonFail) {
  OpenAiStream stream(OpenAiApi::kChat, At(0));
  absl::Status status =
      stream.OnEvent(R"({"error":{"message":"out of KV pages","code":503}})", At(1));
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("out of KV pages"));
  status = stream.OnEvent(R"({"object":"error","message":"bad request"})", At(1));
  EXPECT_THAT(status.message(), HasSubstr("bad request"));
  status = stream.OnEvent(R"({"choices":[{"delta":)", At(1));
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("not valid JSON"));
  status = stream.OnEvent("[1, 2]", At(1));
  EXPECT_THAT(status.message(), HasSubstr("not a JSON object"));
  // Fields of unexpected types are ignored, not thrown on.
  EXPECT_TRUE(stream.OnEvent(R"({"choices":[{"delta":{"content":5}}],"usage":"x"})", At(1)).ok());
  EXPECT_TRUE(stream.OnEvent(R"({"choices":"none","usage":null,"error":null})", At(1)).ok());
}

TEST(ErrorMessageFromBodyTest, FindsTheMessage) {
  EXPECT_EQ(ErrorMessageFromBody(R"({"error":{"message":"max_tokens is too large"}})"),
            "max_tokens is too large");
  EXPECT_EQ(ErrorMessageFromBody(R"({"object":"error","message":"no such model"})"),
            "no such model");
  EXPECT_EQ(ErrorMessageFromBody(R"({"error":"plain"})"), "plain");
  EXPECT_EQ(ErrorMessageFromBody("upstream connect error"), "upstream connect error");
  EXPECT_EQ(ErrorMessageFromBody(""), "(empty body)");
  EXPECT_LT(ErrorMessageFromBody(std::string(5000, 'x')).size(), 400u);
}

}  // namespace
}  // namespace baton::tools
