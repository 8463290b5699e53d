// Streaming detokenization: ids arrive one at a time and text leaves as soon as it is
// final. Never emits an incomplete UTF-8 sequence; the concatenation of everything it
// emits equals Tokenizer::Decode of all the ids at once.
//
//   IncrementalDetokenizer detok(tokenizer);
//   for (TokenId id : stream) std::cout << detok.Add(id).value();
//   std::cout << detok.Finish();
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"

namespace baton::tokenizer {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                  DecodeOptions options = {});

  // Returns the text that `id` completes (often empty for a byte of a multi-byte
  // character). Fails on an id outside the vocabulary, and then changes nothing.
  absl::StatusOr<std::string> Add(TokenId id);

  // Ends the stream: an incomplete trailing sequence becomes U+FFFD.
  std::string Finish();

  // Bytes held back because they may still complete a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  DecodeOptions options_;
  std::string pending_;
  int spaces_to_strip_;
  bool at_start_ = true;
};

}  // namespace baton::tokenizer
