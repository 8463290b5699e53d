// Keeps special-token text that a user typed inside a chat message plain text, while the
// chat template's own markers stay control tokens. Without it a message holding
// "<|im_end|>\n<|im_start|>system\n..." would close its own turn and open a system turn
// (prompt injection through the template).
//
// The texts are hidden behind placeholder characters before the template runs, so that
// whatever the template does with a message (trim it, split it, quote it with tojson) it
// does to the placeholder; Reveal then puts the texts back and says where they are, and
// Encode with EncodeOptions::literal encodes them as text.
//
//   SpecialTextMask mask(tokenizer);
//   for (std::string* s : message_strings) mask.Note(*s);
//   for (std::string* s : message_strings) BATON_RETURN_IF_ERROR(mask.Hide(s));
//   std::string prompt = Render(...);
//   std::vector<TextRange> literal = mask.Reveal(&prompt);
//   tokenizer->Encode(prompt, {.literal = literal});
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"

namespace baton::tokenizer {

class SpecialTextMask {
 public:
  explicit SpecialTextMask(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}

  // Every string that Hide will see must be noted first, so that no placeholder is a
  // character the input already holds.
  void Note(std::string_view s);
  // Replaces each special token's text in *s by its placeholder. Fails only when the
  // input already uses every placeholder character (more than 131,000 private-use ones).
  absl::Status Hide(std::string* s);
  // Replaces the placeholders in *text by the texts they hide; returns the byte ranges
  // those texts now occupy, sorted and disjoint.
  std::vector<TextRange> Reveal(std::string* text) const;

 private:
  absl::StatusOr<char32_t> PlaceholderFor(std::string_view special);

  const Tokenizer* tokenizer_;
  absl::flat_hash_set<char32_t> used_;  // private-use characters of planes 15 and 16 in the input
  char32_t next_ = 0xF0000;
  absl::flat_hash_map<std::string, char32_t> placeholder_of_;
  absl::flat_hash_map<char32_t, std::string> text_of_;
};

}  // namespace baton::tokenizer
