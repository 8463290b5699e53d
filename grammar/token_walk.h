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
    uint32_t begin, end;  // its tops in the pool (begin == end: dead, or not yet made)
    uint32_t arena;       // Pda node count after this level was made
    int32_t state;        // the remembered state of these tops (below), or -1
    bool alive;           // some stack lives
    bool exact;           // some top is not guessed (Pda::set_guess_below)
    bool made;            // the tops are in the pool (a remembered step leaves them out)
    PopFlags flags;       // from this level's byte; gave_up is kept from earlier levels
  };

  // `memo`: remember steps (below); pays off over a whole vocabulary, not over a few
  // hundred tokens.
  TokenWalk(Pda* pda, const TokenVocab* vocab, bool memo = false)
      : pda_(pda), vocab_(vocab), memo_on_(memo) {}

  // Walks vocab.sorted[i] for each i in `order` (ascending). visit(i, token_bytes, depth)
  // is called for each token that Accepted or Uncertain may hold (tokens of a subtree of
  // the trie that died before their end are skipped, a comparison each); depth is how many
  // of its bytes were consumed while some stack lived; level(d) describes the state after
  // d bytes, for d <= depth.
  template <typename Visit>
  void Run(std::span<const int32_t> base, std::span<const int32_t> order, Visit&& visit) {
    const size_t arena0 = pda_->nodes().size();
    pool_.assign(base.begin(), base.end());
    // Sized once: a level per byte of the longest token (the hot loop never grows it).
    levels_.resize(vocab_->max_token_bytes + 1);
    arena0_ = static_cast<int32_t>(arena0);
    ForgetStates();
    levels_[0] = MadeLevel(0, PopFlags{});
    levels_[0].state = Intern(levels_[0]);
    size_t cur = 0;
    std::string_view prev;
    int32_t prev_index = -2;
    for (size_t k = 0; k < order.size(); ++k) {
      const int32_t index = order[k];
      const std::string_view tok = vocab_->sorted_bytes(index);
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
      pool_.resize(levels_[cur].end);
      pda_->nodes().resize(levels_[cur].arena);
      while (cur < tok.size() && levels_[cur].alive) {
        Step(cur, static_cast<uint8_t>(tok[cur]));
        ++cur;
      }
      visit(index, tok, cur);
      prev = tok;
      prev_index = index;
      const Level& l = levels_[cur];
      if (cur < tok.size() && !l.alive && !l.flags.gave_up) {
        // Every token after this one that shares its first `cur` bytes dies at the same
        // byte, before its end: neither accepted nor uncertain, so not visited.
        while (k + 1 < order.size() && order[k + 1] == prev_index + 1 &&
               vocab_->lcp[order[k + 1]] >= cur) {
          prev_index = order[++k];
        }
        prev = vocab_->sorted_bytes(prev_index);
      }
    }
    pda_->nodes().resize(arena0);
  }

  // The token was consumed to its end and the text is still a prefix of a document: some
  // real (not guessed) stack lives, or one finished exactly at the token's end.
  bool Accepted(std::string_view tok, size_t depth) const {
    const Level& l = levels_[depth];
    return depth == tok.size() && ((l.exact && l.alive) || l.flags.emptied);
  }
  // Some stack popped past the walk's bottom on the token's byte d - 1: the rule the walk
  // started in was finished after d bytes (1 <= d <= depth).
  bool Emptied(size_t d) const { return levels_[d].flags.emptied; }
  // Not Accepted, but a guessed stack took the whole token (or the guess was given up):
  // the real stack below the cut decides.
  bool Uncertain(std::string_view tok, size_t depth) const {
    const Level& l = levels_[depth];
    if (l.flags.gave_up) return true;
    return depth == tok.size() && (l.alive || l.flags.guessed_end);
  }

 private:
  // With `memo`, the walk is a DFA built as it goes: a level whose tops all hang on frames
  // older than the walk (a "stable" level) is a state, known by its tops' (pos, parent),
  // and each (state, byte) step taken once is remembered. Inside a string, after any plain
  // character the state is the one before it, and a vocabulary walk takes that step a few
  // hundred thousand times: a remembered step is one table lookup, and its tops are made
  // in the pool only when a step from them is not remembered.
  struct State {
    std::vector<uint64_t> tops;  // (pos, parent) of each top
    bool alive, exact;
  };
  struct Transition {
    int32_t to = -1;  // -1: not taken yet
    PopFlags flags;   // this step's own (gave_up not inherited)
  };
  static constexpr size_t kMaxStates = 4096;

  uint64_t Pair(int32_t top) const {
    const StackNode& n = pda_->nodes()[top];
    return (static_cast<uint64_t>(static_cast<uint32_t>(n.pos)) << 32) |
           static_cast<uint32_t>(n.parent);
  }

  // A level from the pool's tops [begin, end of pool).
  Level MadeLevel(size_t begin, const PopFlags& flags) const {
    Level l{static_cast<uint32_t>(begin),
            static_cast<uint32_t>(pool_.size()),
            static_cast<uint32_t>(pda_->nodes().size()),
            -1,
            pool_.size() > begin,
            false,
            true,
            flags};
    for (size_t i = begin; i < pool_.size() && !l.exact; ++i) {
      l.exact = !pda_->nodes()[pool_[i]].guessed;
    }
    return l;
  }

  // Advances level `cur` by `byte` into level cur + 1.
  void Step(size_t cur, uint8_t byte) {
    const int32_t from_state = levels_[cur].state;
    const bool inherited_gave_up = levels_[cur].flags.gave_up;
    if (from_state >= 0) {
      const Transition& t = transitions_[static_cast<size_t>(from_state) * 256 + byte];
      if (t.to >= 0) {
        const State& s = states_[t.to];
        PopFlags flags = t.flags;
        flags.gave_up = flags.gave_up || inherited_gave_up;
        levels_[cur + 1] = {static_cast<uint32_t>(pool_.size()),
                            static_cast<uint32_t>(pool_.size()),
                            static_cast<uint32_t>(pda_->nodes().size()),
                            t.to,
                            s.alive,
                            s.exact,
                            false,
                            flags};
        return;
      }
    }
    Make(cur);
    const Level from = levels_[cur];
    const size_t begin = pool_.size();
    PopFlags flags;
    pda_->Advance(&pool_, from.begin, from.end, byte, &flags);
    const PopFlags own = flags;
    flags.gave_up = flags.gave_up || inherited_gave_up;
    levels_[cur + 1] = MadeLevel(begin, flags);
    if (from_state < 0) return;
    Level& to = levels_[cur + 1];
    to.state = Intern(to);
    if (to.state >= 0) {
      transitions_[static_cast<size_t>(from_state) * 256 + byte] = {to.state, own};
    }
  }

  // Puts a remembered level's tops in the pool (only the deepest level is ever made late,
  // so they go at the pool's end).
  void Make(size_t cur) {
    Level& l = levels_[cur];
    if (l.made) return;
    l.begin = static_cast<uint32_t>(pool_.size());
    for (uint64_t p : states_[l.state].tops) {
      pool_.push_back(pda_->NewNode(static_cast<int32_t>(p >> 32), static_cast<int32_t>(p)));
    }
    l.end = static_cast<uint32_t>(pool_.size());
    l.arena = static_cast<uint32_t>(pda_->nodes().size());
    l.made = true;
  }

  // The state of a made level, or -1 when it is not stable (a top hangs on a frame the
  // walk made, which the walk rolls back) or too many states are known.
  int32_t Intern(const Level& l) {
    if (!memo_on_) return -1;
    key_.clear();
    for (uint32_t i = l.begin; i < l.end; ++i) {
      if (pda_->nodes()[pool_[i]].parent >= arena0_) return -1;
      key_.push_back(Pair(pool_[i]));
    }
    if (auto it = state_ids_.find(key_); it != state_ids_.end()) return it->second;
    if (states_.size() >= kMaxStates) return -1;
    const int32_t id = static_cast<int32_t>(states_.size());
    states_.push_back({key_, l.alive, l.exact});
    transitions_.resize(states_.size() * 256);
    state_ids_.emplace(key_, id);
    return id;
  }

  void ForgetStates() {
    states_.clear();
    transitions_.clear();
    state_ids_.clear();
  }

  Pda* pda_;
  const TokenVocab* vocab_;
  std::vector<int32_t> pool_;
  std::vector<Level> levels_;
  bool memo_on_;
  int32_t arena0_ = 0;
  std::vector<State> states_;
  std::vector<Transition> transitions_;  // [state * 256 + byte]
  absl::flat_hash_map<std::vector<uint64_t>, int32_t> state_ids_;
  std::vector<uint64_t> key_;
};

}  // namespace baton::grammar
