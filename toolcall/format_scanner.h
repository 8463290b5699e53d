// Internal: the per-format half of a ToolCallParser. A FormatScanner looks at the text not
// yet decided and says what its start is: content, complete calls, or not known yet.
// ParseEngine (parse_engine.h) drives it the same way for Parse and for streaming, which is
// what makes the two agree.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "toolcall/tool_call_format.h"
#include "toolcall/tool_call_parser.h"

namespace baton::toolcall::internal {

struct ScanStep {
  enum class Kind {
    kNeedMore,  // the start of `pending` may still become a call: wait for more text
    kContent,   // the first `length` bytes are content
    kCalls,     // the first `length` bytes are markup holding `calls` (at least one)
  };
  Kind kind = Kind::kNeedMore;
  size_t length = 0;
  std::vector<ToolCall> calls;

  static ScanStep NeedMore() { return {}; }
  static ScanStep Content(size_t length) { return {Kind::kContent, length, {}}; }
  static ScanStep Calls(size_t length, std::vector<ToolCall> calls) {
    return {Kind::kCalls, length, std::move(calls)};
  }
};

class FormatScanner {
 public:
  virtual ~FormatScanner() = default;

  // `pending` is the undecided text; it begins right after the bytes the previous
  // consuming step (kContent or kCalls) covered, and between consuming steps each call
  // sees the same text extended, so a scanner may keep resumable progress until it
  // returns a consuming step. `final`: no more text follows `pending` (end of output, or
  // the engine's bound on held-back bytes); kNeedMore is then not allowed.
  //
  // Contract that keeps streaming equal to whole parsing: a consuming step returned for
  // some `pending` is the one that would be returned for any extension of it.
  virtual ScanStep Next(std::string_view pending, bool final) = 0;
};

std::unique_ptr<FormatScanner> NewScanner(Format format);

std::unique_ptr<FormatScanner> NewHermesScanner();
std::unique_ptr<FormatScanner> NewLlama3JsonScanner();
std::unique_ptr<FormatScanner> NewMistralScanner();
std::unique_ptr<FormatScanner> NewFunctionaryScanner();
std::unique_ptr<FormatScanner> NewCommandRScanner();
std::unique_ptr<FormatScanner> NewDeepSeekR1Scanner();
std::unique_ptr<FormatScanner> NewFirefunctionScanner();

}  // namespace baton::toolcall::internal
