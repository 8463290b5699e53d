#include "grammar/grammar_matcher.h"

#include <algorithm>

#include "common/check.h"
#include "common/strings.h"
#include "grammar/token_walk.h"

namespace baton::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const TokenGrammar> grammar)
    : tg_(std::move(grammar)), pda_(&tg_->grammar()) {
  PopFlags flags;
  for (int32_t alt : tg_->grammar().alternatives(tg_->grammar().root_rule())) {
    pda_.Expand(alt, -1, &pool_, &flags);
  }
  Commit(0, pool_.size(), flags.emptied);
}

int32_t GrammarMatcher::vocab_size() const { return tg_->vocab_size(); }

absl::Status GrammarMatcher::Accept(int32_t token) {
  if (token < 0 || token >= tg_->vocab_size()) {
    return absl::InvalidArgumentError(baton::StrCat("token ", token, " is out of the vocabulary"));
  }
  if (tg_->vocab().special[token]) {
    return absl::InvalidArgumentError(
        baton::StrCat("token ", token, " is a control token, which the grammar never allows"));
  }
  absl::Status s = AcceptBytes(tg_->vocab().bytes(token));
  if (!s.ok()) return absl::InvalidArgumentError(baton::StrCat("token ", token, ": ", s.message()));
  return s;
}

absl::Status GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("an empty token is never allowed");
  const size_t arena0 = pda_.nodes().size();
  pool_.assign(tops_.begin(), tops_.end());
  size_t begin = 0, end = pool_.size();
  PopFlags flags;
  for (size_t i = 0; i < bytes.size(); ++i) {
    flags = PopFlags{};
    pda_.Advance(&pool_, begin, end, static_cast<uint8_t>(bytes[i]), &flags);
    begin = end;
    end = pool_.size();
    if (begin == end && !(flags.emptied && i + 1 == bytes.size())) {
      pda_.nodes().resize(arena0);
      return absl::InvalidArgumentError(
          baton::StrCat("byte ", i, " (", static_cast<int>(static_cast<uint8_t>(bytes[i])),
                        ") leaves the grammar"));
    }
  }
  Commit(begin, end, flags.emptied);
  return absl::OkStatus();
}

void GrammarMatcher::Commit(size_t begin, size_t end, bool emptied) {
  // Each stack as its positions, top first; sorted and deduplicated, they are the
  // canonical state. The arena is rebuilt from them, sharing equal lower parts, so it
  // stays as small as the state however long the sequence runs.
  const auto& nodes = pda_.nodes();
  flat_.clear();
  spans_.clear();
  for (size_t i = begin; i < end; ++i) {
    const uint32_t start = static_cast<uint32_t>(flat_.size());
    for (int32_t n = pool_[i]; n >= 0; n = nodes[n].parent) flat_.push_back(nodes[n].pos);
    spans_.emplace_back(start, static_cast<uint32_t>(flat_.size()) - start);
  }
  auto less = [&](const std::pair<uint32_t, uint32_t>& a, const std::pair<uint32_t, uint32_t>& b) {
    return std::lexicographical_compare(flat_.begin() + a.first, flat_.begin() + a.first + a.second,
                                        flat_.begin() + b.first,
                                        flat_.begin() + b.first + b.second);
  };
  auto equal = [&](const std::pair<uint32_t, uint32_t>& a, const std::pair<uint32_t, uint32_t>& b) {
    return a.second == b.second &&
           std::equal(flat_.begin() + a.first, flat_.begin() + a.first + a.second,
                      flat_.begin() + b.first);
  };
  std::sort(spans_.begin(), spans_.end(), less);
  spans_.erase(std::unique(spans_.begin(), spans_.end(), equal), spans_.end());
  std::vector<StackNode> fresh;
  intern_.clear();
  tops_.clear();
  key_.clear();
  for (const auto& [start, len] : spans_) {
    int32_t parent = -1;
    for (uint32_t j = start + len; j-- > start;) {
      const uint64_t k = (static_cast<uint64_t>(static_cast<uint32_t>(flat_[j])) << 32) |
                         static_cast<uint32_t>(parent);
      auto [it, inserted] = intern_.try_emplace(k, static_cast<int32_t>(fresh.size()));
      if (inserted) fresh.push_back({flat_[j], parent, false});
      parent = it->second;
    }
    tops_.push_back(parent);
    key_.append(reinterpret_cast<const char*>(flat_.data() + start), 4 * size_t{len});
    key_.append(4, '\xff');
  }
  pda_.nodes() = std::move(fresh);
  can_end_ = emptied;
}

void GrammarMatcher::FillMask(std::span<uint32_t> mask) {
  const size_t words = tg_->mask_words();
  BATON_CHECK(mask.size() >= words);
  std::fill(mask.begin() + static_cast<std::ptrdiff_t>(words), mask.end(), 0u);
  std::span<uint32_t> out = mask.first(words);
  if (tops_.empty()) {
    std::fill(out.begin(), out.end(), 0u);
    return;
  }
  if (tg_->masks().Lookup(key_, out)) return;
  ComputeMask(out);
  tg_->masks().Insert(key_, out);
}

void GrammarMatcher::FillMaskUncached(std::span<uint32_t> mask) {
  const size_t words = tg_->mask_words();
  BATON_CHECK(mask.size() >= words);
  std::fill(mask.begin(), mask.end(), 0u);
  if (!tops_.empty()) ComputeMask(mask.first(words));
}

void GrammarMatcher::ComputeMask(std::span<uint32_t> out) {
  std::fill(out.begin(), out.end(), 0u);
  for (size_t i = 0; i < tops_.size(); ++i) {
    const int32_t top = tops_[i];
    auto table = tg_->Table(pda_.nodes()[top].pos);
    table->OrAccepted(out.data());
    if (table->tails != nullptr) AddUncertain(*table, top, out);
  }
}

void GrammarMatcher::AddUncertain(const PositionTable& table, int32_t top,
                                  std::span<uint32_t> out) {
  // The real stack with the top's rule finished, then each distinct tail from there.
  const size_t arena0 = pda_.nodes().size();
  popped_.clear();
  PopFlags flags;
  pda_.Expand(table.rule_end, pda_.nodes()[top].parent, &popped_, &flags);
  tail_ok_.assign(table.tails->token_bytes.size(), 0);
  if (!popped_.empty()) {
    TokenWalk walk(&pda_, table.tails.get());
    walk.Run(popped_, table.tail_order, [&](int32_t index, std::string_view tail, size_t depth) {
      if (walk.Accepted(tail, depth)) tail_ok_[table.tails->sorted[index]] = 1;
    });
  }
  pda_.nodes().resize(arena0);
  for (size_t u = 0; u < table.uncertain_ids.size(); ++u) {
    for (uint32_t r = table.tail_begin[u]; r < table.tail_begin[u + 1]; ++r) {
      if (!tail_ok_[table.tail_refs[r]]) continue;
      const int32_t id = table.uncertain_ids[u];
      out[id >> 5] |= uint32_t{1} << (id & 31);
      break;
    }
  }
}

}  // namespace baton::grammar
