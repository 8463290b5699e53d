// What one grammar position allows, independent of the stack below it (the idea of
// xgrammar's adaptive token mask cache). Each token is run from a stack holding only that
// position; where the position's rule finishes, the walk goes on at every place the rule
// can return to (Grammar::returns, an over-approximation of the real stack). A token is
//   accepted  - consumed to its end on a real (not guessed) stack, or finishing the rule
//               exactly at its end: allowed whatever the stack below holds;
//   rejected  - dead on every stack, guessed ones included: refused whatever the stack
//               below holds, since the real continuations are among the guessed ones;
//   uncertain - alive only on a guessed stack: the real stack decides.
// A matcher state's mask is the union over its stacks of the accepted tokens plus the
// uncertain ones its stack accepts; only those are run at decode time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_vocab.h"

namespace baton::grammar {

struct PositionTable {
  // Accepted tokens: a bitset over ids when that is smaller than the id list.
  std::vector<uint32_t> accepted_bits;
  std::vector<int32_t> accepted_ids;
  // Uncertain tokens as indices into TokenVocab::sorted, ascending (walk order).
  std::vector<int32_t> uncertain;

  size_t bytes() const {
    return sizeof(*this) + 4 * (accepted_bits.size() + accepted_ids.size() + uncertain.size());
  }
  // ORs the accepted tokens into `mask`.
  void OrAccepted(uint32_t* mask) const;
};

// Walks the whole vocabulary once from `pos` (a kBytes position).
std::shared_ptr<const PositionTable> BuildPositionTable(const Grammar& grammar,
                                                        const TokenVocab& vocab, int32_t pos);

}  // namespace baton::grammar
