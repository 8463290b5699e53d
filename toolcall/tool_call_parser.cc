#include "toolcall/tool_call_parser.h"

#include <algorithm>

#include "common/utf8.h"
#include "toolcall/parse_engine.h"

namespace baton::toolcall {
namespace {

// Bytes at the end of `text` that start a UTF-8 sequence it does not finish (0-3).
size_t IncompleteUtf8Suffix(std::string_view text) {
  size_t back = std::min<size_t>(3, text.size());
  for (size_t i = 1; i <= back; ++i) {
    auto byte = static_cast<uint8_t>(text[text.size() - i]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    int length = Utf8SequenceLength(byte);
    return length > static_cast<int>(i) ? i : 0;
  }
  return 0;
}

// Where to cut `text` at or before `at` without splitting a UTF-8 sequence (never before 1,
// so malformed UTF-8 still makes progress).
size_t Utf8Cut(std::string_view text, size_t at) {
  if (at >= text.size()) return text.size();
  size_t cut = at;
  while (cut > 1 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80 && at - cut < 3) --cut;
  return (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80 ? at : cut;
}

}  // namespace

std::unique_ptr<ToolCallParser> ToolCallParser::Create(Format format) {
  return Create(format, kDefaultMaxHeldBytes);
}

std::unique_ptr<ToolCallParser> ToolCallParser::Create(Format format, size_t max_held_bytes) {
  return std::unique_ptr<ToolCallParser>(new ToolCallParser(format, max_held_bytes));
}

ToolCallParser::ToolCallParser(Format format, size_t max_held_bytes)
    : format_(format),
      max_held_bytes_(max_held_bytes),
      engine_(std::make_unique<internal::ParseEngine>(format, max_held_bytes)) {}

ToolCallParser::~ToolCallParser() = default;

ParsedOutput ToolCallParser::Parse(std::string_view text) {
  internal::ParseEngine engine(format_, max_held_bytes_);
  ParsedOutput out;
  engine.Push(text, &out);
  engine.Finish(&out);
  return out;
}

StreamDelta ToolCallParser::Feed(std::string_view fragment) {
  StreamDelta delta;
  if (finished_) return delta;
  ParsedOutput settled;
  engine_->Push(fragment, &settled);
  EmitContent(settled.content, /*final=*/false, &delta);
  EmitCalls(std::move(settled.calls), &delta);
  return delta;
}

StreamDelta ToolCallParser::Finish() {
  StreamDelta delta;
  if (finished_) return delta;
  finished_ = true;
  ParsedOutput settled;
  engine_->Finish(&settled);
  EmitContent(settled.content, /*final=*/true, &delta);
  EmitCalls(std::move(settled.calls), &delta);
  return delta;
}

void ToolCallParser::EmitContent(std::string_view text, bool final, StreamDelta* out) {
  // A client shows each delta as it comes; half a character would render as garbage, so
  // an unfinished UTF-8 sequence waits for its remaining bytes.
  utf8_tail_.append(text);
  size_t keep = final ? 0 : IncompleteUtf8Suffix(utf8_tail_);
  out->content.append(utf8_tail_, 0, utf8_tail_.size() - keep);
  utf8_tail_.erase(0, utf8_tail_.size() - keep);
}

void ToolCallParser::EmitCalls(std::vector<ToolCall> calls, StreamDelta* out) {
  // OpenAI's shape: the name first, then the arguments in fragments.
  for (ToolCall& call : calls) {
    int index = next_index_++;
    out->calls.push_back(ToolCallDelta{index, std::move(call.name), ""});
    std::string_view arguments = call.arguments;
    while (!arguments.empty()) {
      size_t cut = Utf8Cut(arguments, kArgumentChunkBytes);
      out->calls.push_back(ToolCallDelta{index, "", std::string(arguments.substr(0, cut))});
      arguments.remove_prefix(cut);
    }
  }
}

}  // namespace baton::toolcall
