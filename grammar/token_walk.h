// Runs many tokens from one parse state, in byte order (TokenVocab::sorted): each token
// starts from the state its prefix shared with the previous token reached, so a run of
// tokens costs about one step per trie edge, and a dead prefix costs nothing more for
// every token below it. The Pda's arena and the tops pool are rolled back as the walk
// climbs the trie.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "grammar/pda.h"
#include "grammar/token_vocab.h"

namespace baton::grammar {

class TokenWalk {
 public:
  struct Level {
    uint32_t begin, end;  // its tops in the pool
    uint32_t arena;       // Pda node count after this level was made
    bool exact;           // some top is not guessed (Pda::set_guess_below)
    PopFlags flags;       // from this level's byte; gave_up is kept from earlier levels
    bool stable;          // every top's parent outlives the walk (below its first node)
    uint64_t sig;         // hash of the tops' (pos, parent), when stable
  };

  // `memo`: remember steps (below); pays off over a whole vocabulary, not over a few
  // hundred tokens.
  TokenWalk(Pda* pda, const TokenVocab* vocab, bool memo = false)
      : pda_(pda), vocab_(vocab), memo_on_(memo) {}

  // Walks vocab.sorted[i] for each i in `order` (ascending). visit(i, token_bytes, depth)
  // is called once per token; depth is how many of its bytes were consumed while some stack
  // lived; level(d) describes the state after d bytes, for d <= depth.
  template <typename Visit>
  void Run(std::span<const int32_t> base, std::span<const int32_t> order, Visit&& visit) {
    const size_t arena0 = pda_->nodes().size();
    pool_.assign(base.begin(), base.end());
    levels_.clear();
    arena0_ = static_cast<int32_t>(arena0);
    memo_.clear();
    levels_.push_back({0, static_cast<uint32_t>(pool_.size()), static_cast<uint32_t>(arena0), true,
                       PopFlags{}, false, 0});
    Sign(&levels_.back());
    size_t cur = 0;
    std::string_view prev;
    int32_t prev_index = -2;
    for (int32_t index : order) {
      const std::string_view tok = vocab_->bytes(vocab_->sorted[index]);
      size_t common;
      if (index == prev_index + 1) {
        common = vocab_->lcp[index];
      } else {
        common = 0;
        while (common < prev.size() && common < tok.size() && prev[common] == tok[common]) {
          ++common;
        }
      }
      if (common < cur) cur = common;
      levels_.resize(cur + 1);
      pool_.resize(levels_[cur].end);
      pda_->nodes().resize(levels_[cur].arena);
      while (cur < tok.size() && levels_[cur].end > levels_[cur].begin) {
        const uint8_t byte = static_cast<uint8_t>(tok[cur]);
        const Level from = levels_[cur];
        const size_t begin = pool_.size();
        PopFlags flags;
        if (!Replay(from, byte, &flags)) {
          pda_->Advance(&pool_, from.begin, from.end, byte, &flags);
        }
        const bool step_gave_up = flags.gave_up;
        flags.gave_up = flags.gave_up || from.flags.gave_up;
        bool exact = false;
        for (size_t i = begin; i < pool_.size() && !exact; ++i) {
          exact = !pda_->nodes()[pool_[i]].guessed;
        }
        levels_.push_back({static_cast<uint32_t>(begin), static_cast<uint32_t>(pool_.size()),
                           static_cast<uint32_t>(pda_->nodes().size()), exact, flags, false, 0});
        Sign(&levels_.back());
        Remember(from, byte, levels_.back(), step_gave_up);
        ++cur;
      }
      visit(index, tok, cur);
      prev = tok;
      prev_index = index;
    }
    pda_->nodes().resize(arena0);
  }

  // The token was consumed to its end and the text is still a prefix of a document: some
  // real (not guessed) stack lives, or one finished exactly at the token's end.
  bool Accepted(std::string_view tok, size_t depth) const {
    const Level& l = levels_[depth];
    return depth == tok.size() && ((l.exact && l.end > l.begin) || l.flags.emptied);
  }
  // Not Accepted, but a guessed stack took the whole token (or the guess was given up):
  // the real stack below the cut decides.
  bool Uncertain(std::string_view tok, size_t depth) const {
    const Level& l = levels_[depth];
    if (l.flags.gave_up) return true;
    return depth == tok.size() && (l.end > l.begin || l.flags.guessed_end);
  }

 private:
  // Steps between stable levels are remembered by (tops, byte): inside a string, after any
  // plain character the state is the one before it, and a vocabulary walk takes that step
  // a few hundred thousand times; a replay appends nodes without expanding rules.
  struct Step {
    std::vector<uint64_t> from, to;  // (pos, parent) of the tops before and after
    PopFlags flags;
  };

  uint64_t Pair(int32_t top) const {
    const StackNode& n = pda_->nodes()[top];
    return (static_cast<uint64_t>(static_cast<uint32_t>(n.pos)) << 32) |
           static_cast<uint32_t>(n.parent);
  }

  void Sign(Level* l) const {
    if (!memo_on_) return;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (uint32_t i = l->begin; i < l->end; ++i) {
      if (pda_->nodes()[pool_[i]].parent >= arena0_) return;  // rolled back with the walk
      h = (h ^ Pair(pool_[i])) * 0x100000001b3ull;
    }
    l->stable = true;
    l->sig = h;
  }

  bool SameTops(const Level& l, const std::vector<uint64_t>& pairs) const {
    if (pairs.size() != l.end - l.begin) return false;
    for (uint32_t i = l.begin; i < l.end; ++i) {
      if (Pair(pool_[i]) != pairs[i - l.begin]) return false;
    }
    return true;
  }

  bool Replay(const Level& from, uint8_t byte, PopFlags* flags) {
    if (!from.stable) return false;
    auto it = memo_.find(from.sig * 257 + byte);
    if (it == memo_.end() || !SameTops(from, it->second.from)) return false;
    const Step& step = it->second;
    if (step.to == step.from) {  // a loop: the very same frames again
      for (uint32_t i = from.begin; i < from.end; ++i) pool_.push_back(pool_[i]);
    } else {
      for (uint64_t p : step.to) {
        pool_.push_back(pda_->NewNode(static_cast<int32_t>(p >> 32), static_cast<int32_t>(p)));
      }
    }
    *flags = step.flags;
    return true;
  }

  void Remember(const Level& from, uint8_t byte, const Level& to, bool gave_up) {
    if (!from.stable || !to.stable) return;
    if (memo_.size() > 4096) memo_.clear();
    auto [it, inserted] = memo_.try_emplace(from.sig * 257 + byte);
    if (!inserted) return;
    for (uint32_t i = from.begin; i < from.end; ++i) it->second.from.push_back(Pair(pool_[i]));
    for (uint32_t i = to.begin; i < to.end; ++i) it->second.to.push_back(Pair(pool_[i]));
    it->second.flags = to.flags;
    it->second.flags.gave_up = gave_up;  // this step's own; the path's is sticky
  }

  Pda* pda_;
  const TokenVocab* vocab_;
  std::vector<int32_t> pool_;
  std::vector<Level> levels_;
  bool memo_on_;
  int32_t arena0_ = 0;
  absl::flat_hash_map<uint64_t, Step> memo_;
};

}  // namespace baton::grammar
