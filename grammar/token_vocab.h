// A tokenizer's vocabulary as the grammar engine sees it: each token's bytes, and which
// tokens are control tokens. Built once per tokenizer and shared by every TokenGrammar.
// The tokens are also kept in byte order (a flattened trie): neighbours share prefixes,
// and a subtree of the trie is a run of that order, so a walk over it can reuse the parse
// state of the common prefix (token_walk.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::grammar {

struct TokenVocab {
  std::vector<std::string> token_bytes;
  std::vector<bool> special;

  // Non-special, non-empty token ids sorted by their bytes.
  std::vector<int32_t> sorted;
  // lcp[i]: bytes sorted[i] shares with sorted[i - 1] (lcp[0] = 0).
  std::vector<uint16_t> lcp;
  size_t max_token_bytes = 0;
  // first_byte_start[b]: the first index in `sorted` whose token starts with byte b or a
  // later one (257 entries), so a walk can skip every token whose first byte is refused.
  std::vector<int32_t> first_byte_start;

  // The bytes of sorted[0], sorted[1], ... back to back: a walk in sorted order reads
  // them in one stream instead of chasing 128k strings about the heap.
  std::string sorted_blob;
  std::vector<uint32_t> sorted_offset;  // sorted.size() + 1 entries

  int32_t size() const { return static_cast<int32_t>(token_bytes.size()); }
  std::string_view bytes(int32_t id) const { return token_bytes[id]; }
  // The bytes of sorted[index].
  std::string_view sorted_bytes(int32_t index) const {
    return std::string_view(sorted_blob)
        .substr(sorted_offset[index], sorted_offset[index + 1] - sorted_offset[index]);
  }
};

// InvalidArgument when the two vectors differ in length, the vocabulary is empty or larger
// than int32, a token is longer than 65535 bytes or the tokens add up to over 4 GiB.
absl::StatusOr<std::shared_ptr<const TokenVocab>> MakeTokenVocab(
    std::vector<std::string> token_bytes, std::vector<bool> special);

}  // namespace baton::grammar
