// Turns a model's generated text into OpenAI tool calls and content, whole or streamed.
// One parser per generated choice; not thread-safe.
//
//   auto parser = ToolCallParser::Create(Format::kHermes);
//   for (std::string_view piece : detokenized_pieces) {
//     StreamDelta delta = parser->Feed(piece);
//     if (!delta.empty()) SendChunk(delta);
//   }
//   StreamDelta last = parser->Finish();
//
// Streaming and whole parsing agree: the content deltas concatenated plus the calls
// assembled from the call deltas equal Parse() of the whole text, however it was split.
// A call is emitted only once it is complete and valid (its markup is held back until
// then), so a client never sees a call that later turns out malformed. Malformed markup
// comes back as content, unchanged. docs/tool_calls.md has the details.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "toolcall/tool_call_format.h"

namespace baton::toolcall {

namespace internal {
class ParseEngine;
}  // namespace internal

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON object text, compact (nlohmann dump())

  bool operator==(const ToolCall&) const = default;
};

struct ParsedOutput {
  std::string content;
  std::vector<ToolCall> calls;

  bool operator==(const ParsedOutput&) const = default;
};

// One piece of a streamed call: `name` is set only in the call's first delta, later
// deltas carry argument fragments to append.
struct ToolCallDelta {
  int index = 0;
  std::string name;
  std::string arguments;

  bool operator==(const ToolCallDelta&) const = default;
};

struct StreamDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;

  bool empty() const { return content.empty() && calls.empty(); }
};

class ToolCallParser {
 public:
  // Most bytes a parser holds back (a call's markup, whitespace that may be dropped);
  // past that the text is released as content.
  static constexpr size_t kDefaultMaxHeldBytes = size_t{1} << 20;
  // Bytes of arguments per streamed delta after the first.
  static constexpr size_t kArgumentChunkBytes = 16;

  static std::unique_ptr<ToolCallParser> Create(Format format);
  // As above with another bound on held-back bytes (tests use small ones).
  static std::unique_ptr<ToolCallParser> Create(Format format, size_t max_held_bytes);

  virtual ~ToolCallParser();

  Format format() const { return format_; }

  // The whole output at once. Independent of any streaming in progress on this parser.
  ParsedOutput Parse(std::string_view text);

  // Streaming: text arrives in fragments of any size (split anywhere, even inside a marker
  // or a UTF-8 character). Returns what can be sent now; text that might be the start of
  // a marker is held back until it is known.
  StreamDelta Feed(std::string_view fragment);

  // End of output: flushes everything held back (an unfinished or malformed call becomes
  // content). Feed after Finish is not allowed; Finish again returns an empty delta.
  StreamDelta Finish();

 protected:
  ToolCallParser(Format format, size_t max_held_bytes);

 private:
  void EmitContent(std::string_view text, bool final, StreamDelta* out);
  void EmitCalls(std::vector<ToolCall> calls, StreamDelta* out);

  Format format_;
  size_t max_held_bytes_;
  std::unique_ptr<internal::ParseEngine> engine_;
  std::string utf8_tail_;  // an incomplete UTF-8 sequence at the end of released content
  int next_index_ = 0;
  bool finished_ = false;
};

}  // namespace baton::toolcall
