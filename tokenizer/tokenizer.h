// Text <-> token ids for byte-level BPE (GPT-2, Llama 3, Qwen2/3, SmolLM2) and
// SentencePiece-style BPE (Llama 2, Mistral, TinyLlama), built from a Vocab that a
// loader made from tokenizer.json or GGUF. Immutable and thread-safe once built.
//
//   BATON_ASSIGN_OR_RETURN(auto files, LoadTokenizerFiles("models/llama3"));
//   BATON_ASSIGN_OR_RETURN(std::vector<TokenId> ids, files.tokenizer->Encode("Hello"));
//   std::string text = files.tokenizer->Decode(ids).value();
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/bpe.h"
#include "tokenizer/vocab.h"

namespace baton::tokenizer {

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
};

struct EncodeOptions {
  bool add_special_tokens = true;  // BOS/EOS as the model's config says
  bool parse_special = true;       // match special tokens' text ("<|eot_id|>") in the input
  // Sorted, disjoint ranges of the text where special tokens' text is plain text even
  // with parse_special: what a user typed inside a chat message (SpecialTextMask).
  std::span<const TextRange> literal = {};
};

struct DecodeOptions {
  bool skip_special_tokens = true;
};

struct TokenizerLimits {
  // Encode refuses longer input; 16 MiB is ~4M tokens, far past any context window.
  size_t max_input_bytes = size_t{16} << 20;
};

class Tokenizer {
 public:
  static absl::StatusOr<std::shared_ptr<const Tokenizer>> Create(Vocab vocab,
                                                                 TokenizerLimits limits = {});

  // Invalid UTF-8 in `text` is replaced by U+FFFD (maximal subparts), as Python's
  // errors="replace" would; it is never an error.
  absl::StatusOr<std::vector<TokenId>> Encode(std::string_view text,
                                              const EncodeOptions& options = {}) const;

  // Fails on an id outside the vocabulary. Invalid UTF-8 produced by the tokens is
  // replaced by U+FFFD.
  absl::StatusOr<std::string> Decode(std::span<const TokenId> ids,
                                     const DecodeOptions& options = {}) const;

  // The raw bytes token `id` contributes to decoded text (before leading-space strip).
  const std::string& TokenBytes(TokenId id) const { return token_bytes_[id]; }
  bool IsSpecial(TokenId id) const { return is_special_[id]; }
  bool IsValid(TokenId id) const { return id >= 0 && id < vocab_size(); }
  int strip_leading_spaces() const { return vocab_.decoder.strip_leading_spaces; }

  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  TokenId bos_id() const { return vocab_.bos_id; }
  TokenId eos_id() const { return vocab_.eos_id; }
  const Vocab& vocab() const { return vocab_; }
  // The id of a token by its text, or -1.
  TokenId TokenToId(std::string_view token) const;
  // The first exact occurrence, at or after `from`, of a special token's text; false if
  // there is none.
  bool FindSpecialText(std::string_view text, size_t from, TextRange* found) const;

 private:
  explicit Tokenizer(Vocab vocab, TokenizerLimits limits);
  void EncodeSegment(std::string_view text, bool first_segment, std::vector<TokenId>* out) const;
  // Finds the next added token at or after `from`. Returns false if none.
  bool FindAddedToken(std::string_view text, size_t from, const EncodeOptions& options,
                      size_t* begin, size_t* end, TokenId* id) const;

  Vocab vocab_;
  TokenizerLimits limits_;
  BpeEncoder bpe_;
  std::vector<std::string> token_bytes_;
  std::vector<bool> is_special_;
  // Added tokens bucketed by first byte, longest first.
  std::vector<std::vector<const AddedToken*>> added_by_first_byte_;
};

}  // namespace baton::tokenizer
