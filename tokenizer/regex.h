// A compiled PCRE2 pattern in UTF + Unicode-property mode, JIT-compiled where the
// platform allows. The pre-tokenizer regexes need \p{L} and look-ahead, which RE2 lacks.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::tokenizer {

class Regex {
 public:
  // `pattern` follows the Oniguruma/Rust syntax of tokenizer.json, which PCRE2 accepts
  // for every pattern these files use. `$` matches only at the very end, as in Rust.
  static absl::StatusOr<std::shared_ptr<const Regex>> Compile(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of the non-overlapping, non-empty matches in
  // `text`, which must be valid UTF-8.
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>* out) const;

  // Replaces every match with `replacement` (literal).
  std::string ReplaceAll(std::string_view text, std::string_view replacement) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace baton::tokenizer
