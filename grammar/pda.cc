#include "grammar/pda.h"

#include <algorithm>

namespace baton::grammar {

using Kind = Grammar::Kind;

void Pda::Guess(int32_t rule, std::vector<int32_t>* out, PopFlags* flags) {
  if (g_->may_end_document(rule)) flags->guessed_end = true;
  if (!g_->returns_known(rule)) {
    flags->gave_up = true;
    return;
  }
  for (int32_t q : g_->returns(rule)) Expand(q, kGuessed, out, flags);
}

void Pda::Expand(int32_t pos, int32_t parent, std::vector<int32_t>* out, PopFlags* flags) {
  for (;;) {
    if (parent == kGuessed) {
      if (guess_seen_.empty()) guess_seen_.assign(g_->num_positions(), 0);
      if (guess_seen_[pos] == epoch_) return;
      guess_seen_[pos] = epoch_;
    }
    const Grammar::Element& e = g_->element(pos);
    if (e.kind == Kind::kBytes) {
      out->push_back(NewNode(pos, parent));
      return;
    }
    if (e.kind == Kind::kEnd) {
      if (parent == -1) {
        flags->emptied = true;
        if (guess_below_) Guess(g_->rule_of(pos), out, flags);
        return;
      }
      if (parent == kGuessed) {
        Guess(g_->rule_of(pos), out, flags);
        return;
      }
      // Pop: the frame below already points past the reference that pushed us.
      const StackNode below = nodes_[parent];
      if (g_->element(below.pos).kind == Kind::kBytes) {
        out->push_back(parent);
        return;
      }
      pos = below.pos;
      parent = below.parent;
      continue;
    }
    // Rule reference. Build() rejected left recursion, so this recursion ends.
    const int32_t base =
        g_->element(pos + 1).kind == Kind::kEnd ? parent : NewNode(pos + 1, parent);
    const auto alts = g_->alternatives(e.rule);
    for (size_t i = 0; i + 1 < alts.size(); ++i) Expand(alts[i], base, out, flags);
    pos = alts.back();  // Build() left every rule at least one alternative
    parent = base;
  }
}

void Pda::Advance(std::vector<int32_t>* tops, size_t begin, size_t end, uint8_t byte,
                  PopFlags* flags) {
  if (++epoch_ == 0) {  // wrapped: forget every mark
    std::fill(guess_seen_.begin(), guess_seen_.end(), 0u);
    epoch_ = 1;
  }
  const size_t from = tops->size();
  int matched = 0;
  for (size_t i = begin; i < end; ++i) {
    const StackNode n = nodes_[(*tops)[i]];
    if (g_->element(n.pos).bytes.Has(byte)) {
      Expand(n.pos + 1, n.parent, tops, flags);
      ++matched;
    }
  }
  // One top's expansion makes a fresh node for every frame it pushes, so only tops from
  // different sources can meet at one (pos, parent).
  if (matched > 1 && tops->size() - from > 1) Dedupe(tops, from);
}

void Pda::Dedupe(std::vector<int32_t>* out, size_t from) {
  // Same (pos, parent) is the same stack; different parents that hold equal contents are
  // merged only when the matcher commits a token (grammar_matcher.cc), which is enough to
  // keep the set from growing step after step.
  auto key = [&](int32_t id) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(nodes_[id].pos)) << 32) |
           static_cast<uint32_t>(nodes_[id].parent);
  };
  auto begin = out->begin() + static_cast<std::ptrdiff_t>(from);
  if (out->size() - from <= 32) {  // the usual case: a compare per pair beats a sort
    size_t kept = from;
    for (size_t i = from; i < out->size(); ++i) {
      const uint64_t k = key((*out)[i]);
      bool dup = false;
      for (size_t j = from; j < kept && !dup; ++j) dup = key((*out)[j]) == k;
      if (!dup) (*out)[kept++] = (*out)[i];
    }
    out->resize(kept);
    return;
  }
  std::sort(begin, out->end(), [&](int32_t a, int32_t b) { return key(a) < key(b); });
  out->erase(std::unique(begin, out->end(), [&](int32_t a, int32_t b) { return key(a) == key(b); }),
             out->end());
}

}  // namespace baton::grammar
