// The byte-level pushdown automaton a Grammar describes. A parse state is a set of stacks
// (the grammar may be ambiguous: anyOf, optional properties); each stack is a chain of
// StackNodes in an arena, top first, so stacks share their lower parts and a step only
// appends nodes. Rolling back a step is truncating the arena (the token walks in
// token_walk.h do that at every trie branch).
//
// After Expand, every top's position is a kBytes element: rule references are pushed
// (their alternatives expanded) and finished alternatives popped. A reference that ends
// its alternative pushes no continuation (tail call), so right recursion (string
// characters, array items) keeps stacks flat.
//
// Guessing (token_table.h only): a stack may be cut, its lower part unknown. With
// set_guess_below(true), a pop past the bottom (-1) also goes on, as an over-
// approximation, at every place the finished rule can return to (Grammar::returns),
// under the bottom kGuessed; every real continuation is among the guessed ones.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace baton::grammar {

inline constexpr int32_t kGuessed = -2;

struct StackNode {
  int32_t pos;     // the element this frame matches next
  int32_t parent;  // the frame below; -1 at the bottom, kGuessed under a guess
  bool guessed;    // the chain ends in kGuessed
};

struct PopFlags {
  bool emptied = false;      // a stack popped past its bottom (-1)
  bool guessed_end = false;  // a guessed stack popped to where the document may end
  bool gave_up = false;      // a guessed stack reached a rule whose returns were not kept
};

class Pda {
 public:
  explicit Pda(const Grammar* grammar) : g_(grammar) {}

  std::vector<StackNode>& nodes() { return nodes_; }
  const std::vector<StackNode>& nodes() const { return nodes_; }
  int32_t NewNode(int32_t pos, int32_t parent) {
    const bool guessed = parent == kGuessed || (parent >= 0 && nodes_[parent].guessed);
    nodes_.push_back({pos, parent, guessed});
    return static_cast<int32_t>(nodes_.size()) - 1;
  }
  void set_guess_below(bool guess) { guess_below_ = guess; }

  // Appends to `out` the tops reached from frame (pos, parent) by pushing rules and
  // popping finished alternatives; a stack that pops past its bottom sets flags->emptied
  // (the document is complete or, in a cut stack, the cut rule has finished).
  void Expand(int32_t pos, int32_t parent, std::vector<int32_t>* out, PopFlags* flags);

  // Consumes `byte` from the tops (*tops)[begin, end); their expanded successors are
  // appended to *tops (duplicates of (pos, parent) removed from the appended part). One
  // vector holds every level of a walk, so the tops are read by index, not by span.
  void Advance(std::vector<int32_t>* tops, size_t begin, size_t end, uint8_t byte, PopFlags* flags);

  const Grammar& grammar() const { return *g_; }

 private:
  void Guess(int32_t rule, std::vector<int32_t>* out, PopFlags* flags);
  void Dedupe(std::vector<int32_t>* out, size_t from);

  const Grammar* g_;
  std::vector<StackNode> nodes_;
  bool guess_below_ = false;
  // Positions already expanded under kGuessed in this step (guesses can loop through
  // nullable rules; equal guessed frames are equal states).
  std::vector<uint32_t> guess_seen_;
  uint32_t epoch_ = 0;
};

}  // namespace baton::grammar
