// Internal: drives a FormatScanner over text that arrives in pieces and applies the rules
// every format shares: the bound on held-back bytes, and dropping whitespace-only content
// next to calls. Parse and streaming both run it, so they cannot disagree.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "toolcall/format_scanner.h"
#include "toolcall/tool_call_parser.h"

namespace baton::toolcall::internal {

class ParseEngine {
 public:
  ParseEngine(Format format, size_t max_held_bytes);

  // Appends to `out` the content and the calls that `text` settles.
  void Push(std::string_view text, ParsedOutput* out);
  // End of output: everything still held is settled.
  void Finish(ParsedOutput* out);

 private:
  void Drain(bool final, ParsedOutput* out);
  void AddContent(std::string_view text, ParsedOutput* out);

  std::unique_ptr<FormatScanner> scanner_;
  size_t max_held_bytes_;
  std::string pending_;
  size_t start_ = 0;  // pending_[0, start_) is settled
  // The current run of content between calls ("piece"): while it is whitespace only it is
  // held, since it is dropped if a call follows it or precedes it.
  std::string held_space_;
  bool piece_has_text_ = false;
  bool any_call_ = false;
};

}  // namespace baton::toolcall::internal
