#include "tokenizer/regex.h"
#include "common/strings.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace baton::tokenizer {
namespace {

pcre2_code* Code(void* p) { return static_cast<pcre2_code*>(p); }

// Match data is per thread so that one compiled pattern serves many threads without
// an allocation per call.
pcre2_match_data* ThreadMatchData() {
  struct Holder {
    pcre2_match_data* data = pcre2_match_data_create(32, nullptr);
    ~Holder() { pcre2_match_data_free(data); }
  };
  thread_local Holder holder;
  return holder.data;
}

// HF tokenizers' regex engine (Oniguruma) takes \s as the Unicode White_Space property;
// PCRE2's \s with UCP also matches U+180E, which Unicode removed from White_Space in
// 6.3. Spelling the property out makes both engines agree.
std::string UseWhiteSpaceProperty(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 's') {
        out += "\\p{White_Space}";
      } else if (next == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += pattern.substr(i, 2);
      }
      ++i;
      continue;
    }
    out.push_back(pattern[i]);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Regex>> Regex::Compile(std::string_view source) {
  const std::string pattern = UseWhiteSpaceProperty(source);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(
      reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
      PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(baton::StrCat("invalid pre-tokenizer regex at offset ",
                                                    offset, ": ", reinterpret_cast<char*>(message),
                                                    " (pattern: ", source, ")"));
  }
  // JIT is an optimization only: without it matching is slower but identical.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::shared_ptr<Regex> regex(new Regex());
  regex->pattern_ = std::string(source);
  regex->code_ = code;
  return std::shared_ptr<const Regex>(std::move(regex));
}

Regex::~Regex() { pcre2_code_free(Code(code_)); }

void Regex::FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>* out) const {
  pcre2_match_data* md = ThreadMatchData();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start < text.size()) {
    const int rc =
        pcre2_match(Code(code_), subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t begin = ov[0];
    size_t end = ov[1];
    if (end == begin) {
      // Skip an empty match by one whole character.
      size_t next = begin + 1;
      while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
      start = next;
      continue;
    }
    out->emplace_back(begin, end);
    start = end;
  }
}

std::string Regex::ReplaceAll(std::string_view text, std::string_view replacement) const {
  std::vector<std::pair<size_t, size_t>> spans;
  FindAll(text, &spans);
  std::string out;
  size_t last = 0;
  for (const auto& [b, e] : spans) {
    out.append(text.substr(last, b - last));
    out.append(replacement);
    last = e;
  }
  out.append(text.substr(last));
  return out;
}

}  // namespace baton::tokenizer
