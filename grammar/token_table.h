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
// uncertain ones its stack accepts. An uncertain token left the position's rule after some
// of its bytes (it finished the rule there, then went on on guessed stacks), so what
// decides is whether the rest of it, its tail, goes on from the real stack once the rule
// is finished. Many tokens share a tail ('",' ends a thousand words), so at decode time
// each distinct tail is walked once, from the real stack popped past the rule.
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
  // The distinct tails of the uncertain tokens, as a vocabulary of their own (walked as the
  // real one is); null when no token is uncertain.
  std::shared_ptr<const TokenVocab> tails;
  std::vector<int32_t> tail_order;  // 0 .. tails->sorted.size() - 1: walk every tail
  // Uncertain token uncertain_ids[i] is allowed when one of its tails
  // tail_refs[tail_begin[i] .. tail_begin[i + 1]) (ids in `tails`) is.
  std::vector<int32_t> uncertain_ids;
  std::vector<uint32_t> tail_begin;
  std::vector<int32_t> tail_refs;
  // An end of the position's rule: the real stack finishes the rule from there.
  int32_t rule_end = -1;

  size_t bytes() const;
  // ORs the accepted tokens into `mask`.
  void OrAccepted(uint32_t* mask) const;
};

// Walks the whole vocabulary once from `pos` (a kBytes position).
std::shared_ptr<const PositionTable> BuildPositionTable(const Grammar& grammar,
                                                        const TokenVocab& vocab, int32_t pos);

}  // namespace baton::grammar
