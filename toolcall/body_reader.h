// Internal: reads a call's markup step by step (literals, whitespace, a JSON value, a
// name), tells "need more text" from "not a call", and resumes long scans where the
// previous attempt on the same text stopped, so feeding a 1 MiB call byte by byte stays
// linear.
//
//   BodyReader r(pending, final, &cache_);
//   std::string_view json;
//   if (!r.Literal("<tool_call>") || !r.Ws() || !r.Json("{", &json)) return r.Stop();
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "toolcall/format_scanner.h"

namespace baton::toolcall::internal {

// Deepest JSON nesting accepted in a call. nlohmann's dump() recurses, so a deeper value
// could overflow the stack; no real tool takes arguments this deep.
inline constexpr int kMaxJsonDepth = 256;
// Longest function name (or Mistral call id) read from raw markup.
inline constexpr size_t kMaxNameBytes = 256;

bool IsJsonSpace(char c);
bool IsNameChar(char c);

// Progress of scans since the last consuming step, keyed by where each scan started.
class ScanCache {
 public:
  struct JsonScan {
    size_t start = 0;
    size_t pos = 0;  // next byte to look at
    int depth = 0;
    bool in_string = false;
    bool escape = false;
    bool done = false;  // the value closed at `pos`
    bool bad = false;   // not a JSON value of the accepted kinds, or too deep
  };
  struct WsScan {
    size_t start = 0;
    size_t end = 0;
  };

  void Clear() {
    json_.clear();
    ws_.clear();
  }
  JsonScan* Json(size_t start);
  WsScan* Ws(size_t start);

 private:
  std::vector<JsonScan> json_;
  std::vector<WsScan> ws_;
};

class BodyReader {
 public:
  enum class Status { kOk, kNeedMore, kInvalid };

  BodyReader(std::string_view text, bool final, ScanCache* cache)
      : text_(text), final_(final), cache_(cache) {}

  size_t pos() const { return pos_; }
  Status status() const { return status_; }
  bool final() const { return final_; }
  std::string_view text() const { return text_; }
  std::string_view Rest() const { return text_.substr(pos_); }

  // Each reader returns false once this reader has stopped (need more text, or invalid at
  // pos()), and then does nothing.

  // `lit` must come next.
  bool Literal(std::string_view lit);
  // `lit` may come next: *matched says whether it did (and was consumed).
  bool OptionalLiteral(std::string_view lit, bool* matched);
  // Skips JSON whitespace; needs the byte after it (or the end of output).
  bool Ws();
  // A JSON value starting with one of `openers` ('{', '['), as raw text.
  bool Json(std::string_view openers, std::string_view* span);
  // 1..kMaxNameBytes bytes of IsNameChar; needs the byte after it (or the end of output).
  bool Name(std::string_view* name);
  // The next byte, or -1 at the end of output.
  bool PeekOrEnd(int* c);

  // Gives up: not a call at pos().
  bool Invalid() {
    if (status_ == Status::kOk) status_ = Status::kInvalid;
    return false;
  }
  // Needs bytes past the end of the text. At the end of output the markup is unfinished:
  // everything read becomes content, none of it is scanned again (which keeps nested
  // unfinished markers linear).
  bool NeedMore() {
    if (status_ != Status::kOk) return false;
    if (final_) {
      pos_ = text_.size();
      status_ = Status::kInvalid;
    } else {
      status_ = Status::kNeedMore;
    }
    return false;
  }
  // The step for a reader that stopped: kNeedMore, or the bytes read so far as content
  // (at least one, so scanning moves on; never more than was read, so a marker that made
  // the attempt fail is looked at again).
  ScanStep Stop() const;

 private:
  std::string_view text_;
  bool final_;
  ScanCache* cache_;
  size_t pos_ = 0;
  Status status_ = Status::kOk;
};

// Earliest position in `text` where one of `markers` starts, or where a suffix of `text`
// is a proper prefix of one (it may become a marker); text.size() if none.
size_t FindMarkerCandidate(std::string_view text, const std::vector<std::string_view>& markers);

}  // namespace baton::toolcall::internal
