#include "toolcall/body_reader.h"

#include <algorithm>

namespace baton::toolcall::internal {

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == ':';
}

ScanCache::JsonScan* ScanCache::Json(size_t start) {
  for (JsonScan& scan : json_) {
    if (scan.start == start) return &scan;
  }
  json_.push_back(JsonScan{.start = start, .pos = start});
  return &json_.back();
}

ScanCache::WsScan* ScanCache::Ws(size_t start) {
  for (WsScan& scan : ws_) {
    if (scan.start == start) return &scan;
  }
  ws_.push_back(WsScan{.start = start, .end = start});
  return &ws_.back();
}

bool BodyReader::Literal(std::string_view lit) {
  if (status_ != Status::kOk) return false;
  size_t n = std::min(lit.size(), text_.size() - pos_);
  if (text_.compare(pos_, n, lit.substr(0, n)) != 0) return Invalid();
  if (n < lit.size()) return NeedMore();
  pos_ += n;
  return true;
}

bool BodyReader::OptionalLiteral(std::string_view lit, bool* matched) {
  *matched = false;
  if (status_ != Status::kOk) return false;
  size_t n = std::min(lit.size(), text_.size() - pos_);
  if (text_.compare(pos_, n, lit.substr(0, n)) != 0) return true;
  if (n < lit.size()) {
    // At the end of output a partial literal is simply absent.
    if (final_) return true;
    return NeedMore();
  }
  pos_ += n;
  *matched = true;
  return true;
}

bool BodyReader::Ws() {
  if (status_ != Status::kOk) return false;
  ScanCache::WsScan* scan = cache_->Ws(pos_);
  while (scan->end < text_.size() && IsJsonSpace(text_[scan->end])) ++scan->end;
  if (scan->end == text_.size() && !final_) return NeedMore();
  pos_ = scan->end;
  return true;
}

bool BodyReader::Json(std::string_view openers, std::string_view* span) {
  if (status_ != Status::kOk) return false;
  ScanCache::JsonScan* scan = cache_->Json(pos_);
  if (scan->pos == scan->start) {
    if (scan->pos == text_.size()) return NeedMore();
    if (openers.find(text_[scan->pos]) == std::string_view::npos) scan->bad = true;
  }
  // The structure only: brackets outside strings. nlohmann checks the grammar once the
  // value closes, so each byte is looked at a bounded number of times.
  while (!scan->done && !scan->bad && scan->pos < text_.size()) {
    char c = text_[scan->pos++];
    if (scan->in_string) {
      if (scan->escape) {
        scan->escape = false;
      } else if (c == '\\') {
        scan->escape = true;
      } else if (c == '"') {
        scan->in_string = false;
      }
    } else if (c == '"') {
      scan->in_string = true;
    } else if (c == '{' || c == '[') {
      if (++scan->depth > kMaxJsonDepth) scan->bad = true;
    } else if (c == '}' || c == ']') {
      if (--scan->depth == 0) scan->done = true;
    }
  }
  if (scan->bad) {
    // What was scanned is not rescanned: the attempt's text becomes content.
    pos_ = std::max(pos_, scan->pos == scan->start ? scan->pos : scan->pos - 1);
    return Invalid();
  }
  if (!scan->done) return NeedMore();
  *span = text_.substr(scan->start, scan->pos - scan->start);
  pos_ = scan->pos;
  return true;
}

bool BodyReader::Name(std::string_view* name) {
  if (status_ != Status::kOk) return false;
  size_t end = pos_;
  while (end < text_.size() && end - pos_ <= kMaxNameBytes && IsNameChar(text_[end])) ++end;
  if (end - pos_ > kMaxNameBytes) return Invalid();
  if (end == text_.size() && !final_) return NeedMore();
  if (end == pos_) return Invalid();
  *name = text_.substr(pos_, end - pos_);
  pos_ = end;
  return true;
}

bool BodyReader::PeekOrEnd(int* c) {
  if (status_ != Status::kOk) return false;
  if (pos_ < text_.size()) {
    *c = static_cast<unsigned char>(text_[pos_]);
    return true;
  }
  if (!final_) return NeedMore();
  *c = -1;
  return true;
}

ScanStep BodyReader::Stop() const {
  if (status_ == Status::kNeedMore) return ScanStep::NeedMore();
  return ScanStep::Content(std::max<size_t>(pos_, 1));
}

size_t FindMarkerCandidate(std::string_view text, const std::vector<std::string_view>& markers) {
  size_t best = text.size();
  for (std::string_view marker : markers) {
    size_t at = text.find(marker);
    if (at != std::string_view::npos) best = std::min(best, at);
    // The longest suffix of text that is a proper prefix of the marker.
    size_t longest = std::min(marker.size() - 1, text.size());
    for (size_t k = longest; k > 0; --k) {
      if (text.size() - k >= best) break;
      if (text.compare(text.size() - k, k, marker.substr(0, k)) == 0) {
        best = text.size() - k;
        break;
      }
    }
  }
  return best;
}

}  // namespace baton::toolcall::internal
