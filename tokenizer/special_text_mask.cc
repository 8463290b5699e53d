#include "tokenizer/special_text_mask.h"

#include "common/strings.h"
#include "common/utf8.h"

namespace baton::tokenizer {
namespace {

// Placeholders come from the supplementary private-use planes (U+F0000..U+10FFFD): no
// tokenizer normalizes them and no template tests them, and real text almost never holds
// them. Their UTF-8 starts with F3 B0..BF or F4 80..8F.
constexpr char32_t kFirst = 0xF0000;
constexpr char32_t kLast = 0x10FFFD;

bool IsPrivateUseLead(std::string_view s, size_t i) {
  if (i + 4 > s.size()) return false;
  const auto b0 = static_cast<uint8_t>(s[i]);
  const auto b1 = static_cast<uint8_t>(s[i + 1]);
  return (b0 == 0xF3 && b1 >= 0xB0) || (b0 == 0xF4 && b1 <= 0x8F);
}

bool IsNonCharacter(char32_t cp) { return (cp & 0xFFFE) == 0xFFFE; }

}  // namespace

void SpecialTextMask::Note(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (!IsPrivateUseLead(s, i)) continue;
    size_t pos = i;
    char32_t cp = 0;
    if (DecodeUtf8(s, &pos, &cp) && cp >= kFirst) used_.insert(cp);
  }
}

absl::StatusOr<char32_t> SpecialTextMask::PlaceholderFor(std::string_view special) {
  auto it = placeholder_of_.find(absl::string_view(special.data(), special.size()));
  if (it != placeholder_of_.end()) return it->second;
  while (next_ <= kLast && (used_.contains(next_) || IsNonCharacter(next_))) ++next_;
  if (next_ > kLast) {
    return absl::InvalidArgumentError(
        "the messages use so many private-use characters (U+F0000..U+10FFFD) that special "
        "tokens' text in them cannot be kept as plain text");
  }
  const char32_t cp = next_++;
  placeholder_of_.emplace(std::string(special), cp);
  text_of_.emplace(cp, std::string(special));
  return cp;
}

absl::Status SpecialTextMask::Hide(std::string* s) {
  TextRange found;
  if (!tokenizer_->FindSpecialText(*s, 0, &found)) return absl::OkStatus();
  std::string out;
  out.reserve(s->size());
  size_t pos = 0;
  do {
    out.append(*s, pos, found.begin - pos);
    absl::StatusOr<char32_t> cp =
        PlaceholderFor(std::string_view(*s).substr(found.begin, found.end - found.begin));
    if (!cp.ok()) return cp.status();
    AppendUtf8(*cp, &out);
    pos = found.end;
  } while (tokenizer_->FindSpecialText(*s, pos, &found));
  out.append(*s, pos);
  *s = std::move(out);
  return absl::OkStatus();
}

std::vector<TextRange> SpecialTextMask::Reveal(std::string* text) const {
  std::vector<TextRange> ranges;
  if (text_of_.empty()) return ranges;
  std::string out;
  out.reserve(text->size());
  size_t copied = 0;
  for (size_t i = 0; i < text->size(); ++i) {
    if (!IsPrivateUseLead(*text, i)) continue;
    size_t pos = i;
    char32_t cp = 0;
    if (!DecodeUtf8(*text, &pos, &cp)) continue;
    auto it = text_of_.find(cp);
    if (it == text_of_.end()) continue;
    out.append(*text, copied, i - copied);
    const size_t begin = out.size();
    out += it->second;
    // Adjacent texts ("<|im_end|><|im_end|>") make one range.
    if (!ranges.empty() && ranges.back().end == begin) {
      ranges.back().end = out.size();
    } else {
      ranges.push_back({begin, out.size()});
    }
    copied = pos;
    i = pos - 1;
  }
  out.append(*text, copied);
  *text = std::move(out);
  return ranges;
}

}  // namespace baton::tokenizer
