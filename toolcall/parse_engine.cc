#include "toolcall/parse_engine.h"

#include <algorithm>

#include "toolcall/body_reader.h"

namespace baton::toolcall::internal {

std::unique_ptr<FormatScanner> NewScanner(Format format) {
  switch (format) {
    case Format::kHermes:
      return NewHermesScanner();
    case Format::kLlama3Json:
      return NewLlama3JsonScanner();
    case Format::kMistral:
      return NewMistralScanner();
    case Format::kFunctionary:
      return NewFunctionaryScanner();
    case Format::kCommandR:
      return NewCommandRScanner();
    case Format::kDeepSeekR1:
      return NewDeepSeekR1Scanner();
    case Format::kFirefunction:
      return NewFirefunctionScanner();
  }
  return NewHermesScanner();
}

ParseEngine::ParseEngine(Format format, size_t max_held_bytes)
    : scanner_(NewScanner(format)), max_held_bytes_(std::max<size_t>(max_held_bytes, 1)) {}

void ParseEngine::Push(std::string_view text, ParsedOutput* out) {
  pending_.append(text);
  Drain(/*final=*/false, out);
}

void ParseEngine::Finish(ParsedOutput* out) {
  Drain(/*final=*/true, out);
  if (!piece_has_text_ && !held_space_.empty() && !any_call_) out->content.append(held_space_);
  held_space_.clear();
}

void ParseEngine::Drain(bool final, ParsedOutput* out) {
  while (start_ < pending_.size()) {
    // The scanner sees at most max_held_bytes_: where it cannot decide within them, the
    // bound acts as the end of output. The window starts where the previous step ended, a
    // position that does not depend on how the text was split, so neither does the cut.
    std::string_view view = std::string_view(pending_).substr(start_, max_held_bytes_);
    ScanStep step = scanner_->Next(view, final);
    if (step.kind == ScanStep::Kind::kNeedMore && view.size() >= max_held_bytes_) {
      step = scanner_->Next(view, /*final=*/true);
    }
    if (step.kind == ScanStep::Kind::kNeedMore) {
      if (!final) break;
      step = ScanStep::Content(view.size());  // a scanner that breaks its contract
    }
    size_t length = std::clamp<size_t>(step.length, 1, view.size());
    if (step.kind == ScanStep::Kind::kContent || step.calls.empty()) {
      AddContent(view.substr(0, length), out);
    } else {
      if (!piece_has_text_) held_space_.clear();
      piece_has_text_ = false;
      any_call_ = true;
      for (ToolCall& call : step.calls) out->calls.push_back(std::move(call));
    }
    start_ += length;
  }
  // Settled text is dropped in bulk, so a long held call costs no repeated moves.
  if (start_ == pending_.size()) {
    pending_.clear();
    start_ = 0;
  } else if (start_ >= 4096 && start_ >= pending_.size() / 2) {
    pending_.erase(0, start_);
    start_ = 0;
  }
}

void ParseEngine::AddContent(std::string_view text, ParsedOutput* out) {
  if (piece_has_text_) {
    out->content.append(text);
    return;
  }
  if (std::all_of(text.begin(), text.end(), IsJsonSpace)) {
    held_space_.append(text);
    // Held whitespace is bounded too: a run this long is kept as content.
    if (held_space_.size() >= max_held_bytes_) {
      piece_has_text_ = true;
      out->content.append(held_space_);
      held_space_.clear();
    }
    return;
  }
  piece_has_text_ = true;
  out->content.append(held_space_);
  held_space_.clear();
  out->content.append(text);
}

}  // namespace baton::toolcall::internal
