// The BPE merge loop for one pre-tokenized piece. Pairs merge lowest rank first, ties
// leftmost first, as HF tokenizers and llama.cpp both do.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace baton::tokenizer {

class BpeEncoder {
 public:
  // `vocab` must outlive the encoder. Construction precomputes the whole-piece table
  // (one merge loop per token), which costs tens of milliseconds for a 128k vocabulary.
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
  void EncodeWithMerges(std::string_view piece, std::vector<TokenId>* out) const;
  // Merges pairs of `symbols` in place; dead symbols get id -2.
  void MergeShort(std::vector<Symbol>* symbols) const;
  void MergeLong(std::vector<Symbol>* symbols) const;
  // The merge of (left, right): its rank, and the merged id in *result; INT32_MAX if none.
  int32_t PairRank(TokenId left, TokenId right, TokenId* result) const;
  void EmitSentencePiece(std::string_view piece, const std::vector<Symbol>& symbols,
                         std::vector<TokenId>* out) const;

  const Vocab* vocab_;
  std::array<TokenId, 256> byte_ids_{};  // byte-level: id of each byte's character;
                                         // SentencePiece: id of <0xNN>
  // Pieces whose whole encoding is one token, keyed by the piece's bytes. Most pieces of
  // real text are (about 90% for GPT-2 and Llama 3), and they skip the merge loop. A
  // token is here only if the merge loop itself gives that token back (or the
  // vocabulary sets ignore_merges), so results are identical by construction.
  TextMap whole_piece_;
};

}  // namespace baton::tokenizer
