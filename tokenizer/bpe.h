// The BPE merge loop for one pre-tokenized piece. Pairs merge lowest rank first, ties
// leftmost first, as HF tokenizers and llama.cpp both do.
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace baton::tokenizer {

class BpeEncoder {
 public:
  // `vocab` must outlive the encoder.
  explicit BpeEncoder(const Vocab* vocab);

  // Appends the ids of `piece` (already normalized and pre-tokenized; raw bytes for
  // byte-level vocabularies) to `out`.
  void EncodePiece(std::string_view piece, std::vector<TokenId>* out) const;

 private:
  struct Symbol {
    TokenId id;
    int prev;
    int next;
    uint32_t begin;  // byte range in the piece, for byte fallback
    uint32_t end;
  };
  void Merge(std::vector<Symbol>* symbols) const;
  void EmitSentencePiece(std::string_view piece, const std::vector<Symbol>& symbols,
                         std::vector<TokenId>* out) const;

  const Vocab* vocab_;
  std::array<TokenId, 256> byte_ids_{};  // byte-level: id of each byte's character;
                                         // SentencePiece: id of <0xNN>
};

}  // namespace baton::tokenizer
