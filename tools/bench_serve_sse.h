// Server-sent events as OpenAI-compatible servers stream them, and the meaning of each
// event's data for a benchmark: when content arrived, the usage, [DONE], errors.
//
//   OpenAiStream stream(OpenAiApi::kChat, BenchClock::now());
//   SseParser sse;
//   // for each read from the socket, however the bytes were split:
//   BATON_RETURN_IF_ERROR(sse.Feed(bytes, [&](std::string_view data) {
//     return stream.OnEvent(data, read_time);
//   }));
//   if (stream.done()) stream.Finish(end_time, &result);
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "tools/bench_serve_result.h"

namespace baton::tools {

// Splits a byte stream into events (WHATWG EventSource rules): lines end in LF, CR or
// CRLF, even when a CRLF is split across two reads; consecutive `data:` lines join with
// LF; a blank line ends an event; `:` lines are comments; other fields are ignored.
class SseParser {
 public:
  using EventFn = std::function<absl::Status(std::string_view data)>;

  explicit SseParser(size_t max_event_bytes = size_t{16} << 20)
      : max_event_bytes_(max_event_bytes) {}

  // Calls `on_event` for each event completed by `bytes`; stops at and returns the first
  // error it returns, or an error when an event outgrows the limit.
  absl::Status Feed(std::string_view bytes, const EventFn& on_event);

 private:
  absl::Status EndLine(const EventFn& on_event);

  size_t max_event_bytes_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool skip_lf_ = false;  // the last byte was CR: an LF right after it ends no new line
};

enum class OpenAiApi { kCompletions, kChat };

// Interprets the `data` of each event of a streamed completion or chat completion.
class OpenAiStream {
 public:
  OpenAiStream(OpenAiApi api, BenchClock::time_point start) : api_(api), clock_(start) {}

  // `t` is when the bytes holding this event were read. Returns an error for an error
  // event or data that is not the expected JSON.
  absl::Status OnEvent(std::string_view data, BenchClock::time_point t);

  bool done() const { return done_; }  // saw `data: [DONE]`

  // Fills timings, token counts and usage (success and error are left to the caller).
  void Finish(BenchClock::time_point end, RequestResult* r) const;

 private:
  OpenAiApi api_;
  StreamClock clock_;
  bool done_ = false;
  int64_t prompt_tokens_ = -1;
  int64_t completion_tokens_ = -1;
  int64_t cached_tokens_ = -1;
};

// The message of an OpenAI-style error body ({"error": {"message": ...}} or vLLM's
// {"object": "error", "message": ...}), else the body itself, shortened.
std::string ErrorMessageFromBody(std::string_view body);

}  // namespace baton::tools
