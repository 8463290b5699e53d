#include "grammar/token_table.h"

#include <numeric>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "common/check.h"
#include "grammar/pda.h"
#include "grammar/token_walk.h"

namespace baton::grammar {

size_t PositionTable::bytes() const {
  size_t n = sizeof(*this) + 4 * (accepted_bits.size() + accepted_ids.size() + tail_order.size() +
                                  uncertain_ids.size() + tail_begin.size() + tail_refs.size());
  if (tails != nullptr) {
    const TokenVocab& v = *tails;
    for (const std::string& t : v.token_bytes) n += sizeof(std::string) + t.capacity();
    n += sizeof(v) + v.sorted_blob.size() + v.special.size() / 8 + 4 * v.sorted.size() +
         2 * v.lcp.size() + 4 * v.sorted_offset.size() + 4 * v.first_byte_start.size();
  }
  return n;
}

void PositionTable::OrAccepted(uint32_t* mask) const {
  const size_t n = accepted_bits.size();
  for (size_t i = 0; i < n; ++i) mask[i] |= accepted_bits[i];
  for (int32_t id : accepted_ids) mask[id >> 5] |= uint32_t{1} << (id & 31);
}

std::shared_ptr<const PositionTable> BuildPositionTable(const Grammar& grammar,
                                                        const TokenVocab& vocab, int32_t pos) {
  auto table = std::make_shared<PositionTable>();
  table->rule_end = pos;
  while (grammar.element(table->rule_end).kind != Grammar::Kind::kEnd) ++table->rule_end;
  Pda pda(&grammar);
  pda.set_guess_below(true);
  const int32_t base = pda.NewNode(pos, -1);
  // Only tokens whose first byte the position takes can be anything but rejected.
  std::vector<int32_t> order;
  const ByteSet& first = grammar.element(pos).bytes;
  for (int b = 0; b < 256; ++b) {
    if (!first.Has(static_cast<uint8_t>(b))) continue;
    for (int32_t i = vocab.first_byte_start[b]; i < vocab.first_byte_start[b + 1]; ++i) {
      order.push_back(i);
    }
  }
  // Remembering steps pays off only over many tokens (string contents: most of them).
  TokenWalk walk(&pda, &vocab, /*memo=*/order.size() > 4096);
  std::vector<int32_t> accepted;
  std::vector<std::string> tails;
  absl::flat_hash_map<std::string, int32_t> tail_ids;
  walk.Run(std::span<const int32_t>(&base, 1), order,
           [&](int32_t index, std::string_view tok, size_t depth) {
             const int32_t id = vocab.sorted[index];
             if (walk.Accepted(tok, depth)) {
               accepted.push_back(id);
               return;
             }
             if (!walk.Uncertain(tok, depth)) return;
             table->uncertain_ids.push_back(id);
             table->tail_begin.push_back(static_cast<uint32_t>(table->tail_refs.size()));
             // Only a finished rule leads onto a guessed stack, so the token finished it
             // somewhere before its end (finishing it at the end would have accepted it).
             for (size_t d = 1; d <= depth && d < tok.size(); ++d) {
               if (!walk.Emptied(d)) continue;
               auto [it, added] = tail_ids.try_emplace(std::string(tok.substr(d)),
                                                       static_cast<int32_t>(tails.size()));
               if (added) tails.emplace_back(tok.substr(d));
               table->tail_refs.push_back(it->second);
             }
             BATON_CHECK(table->tail_refs.size() > table->tail_begin.back());
           });
  table->tail_begin.push_back(static_cast<uint32_t>(table->tail_refs.size()));
  if (!tails.empty()) {
    auto made = MakeTokenVocab(std::move(tails), std::vector<bool>(tail_ids.size(), false));
    BATON_CHECK(made.ok());  // tails are non-empty slices of valid tokens
    table->tails = *std::move(made);
    table->tail_order.resize(table->tails->sorted.size());
    std::iota(table->tail_order.begin(), table->tail_order.end(), 0);
  }
  const size_t words = (static_cast<size_t>(vocab.size()) + 31) / 32;
  if (accepted.size() > words) {
    table->accepted_bits.assign(words, 0);
    for (int32_t id : accepted) table->accepted_bits[id >> 5] |= uint32_t{1} << (id & 31);
  } else {
    table->accepted_ids = std::move(accepted);
  }
  return table;
}

}  // namespace baton::grammar
