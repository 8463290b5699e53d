// One sequence's place in a TokenGrammar: the parse stacks after the tokens accepted so
// far, and the mask of tokens that may come next. One per sequence; not thread-safe
// (the TokenGrammar it reads is). Copyable, which is how tests brute-force a mask.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "grammar/pda.h"
#include "grammar/token_grammar.h"

namespace baton::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const TokenGrammar> grammar);

  int32_t vocab_size() const;
  // One bit per token id, LSB first in 32-bit words (word i bit j = id 32*i+j); mask.size()
  // >= (vocab_size+31)/32 (words past that are zeroed). Set = the token's bytes keep the
  // text a prefix of some document of the grammar. Special tokens and empty tokens are
  // never set.
  void FillMask(std::span<uint32_t> mask);
  // The same mask, computed without reading or filling the shared per-state cache (tests
  // compare the two).
  void FillMaskUncached(std::span<uint32_t> mask);
  // Advances by the token's bytes. InvalidArgument if the token is not allowed (state
  // unchanged).
  absl::Status Accept(int32_t token);
  // Advances by raw bytes, all or nothing (tests, and replaying text).
  absl::Status AcceptBytes(std::string_view bytes);
  // The text so far is a complete document (the caller may then allow end-of-sequence ids).
  bool CanEnd() const { return can_end_; }
  // Complete and nothing may follow (the caller then allows only end-of-sequence ids).
  bool MustEnd() const { return can_end_ && tops_.empty(); }
  // The canonical state: equal keys, equal futures (the mask cache's key).
  std::string_view state_key() const { return key_; }

 private:
  void Commit(size_t begin, size_t end, bool emptied);
  void ComputeMask(std::span<uint32_t> mask);
  // ORs into `mask` the table's uncertain tokens that the real stack under `top` allows.
  void AddUncertain(const PositionTable& table, int32_t top, std::span<uint32_t> mask);

  std::shared_ptr<const TokenGrammar> tg_;
  Pda pda_;                    // holds only the committed stacks between calls
  std::vector<int32_t> tops_;  // committed tops, one per stack, canonical order
  bool can_end_ = false;
  std::string key_;
  // Scratch, kept for its capacity.
  std::vector<int32_t> pool_;
  std::vector<int32_t> flat_;
  std::vector<std::pair<uint32_t, uint32_t>> spans_;
  absl::flat_hash_map<uint64_t, int32_t> intern_;
  std::vector<int32_t> popped_;
  std::vector<char> tail_ok_;
};

}  // namespace baton::grammar
