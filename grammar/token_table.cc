#include "grammar/token_table.h"

#include "grammar/pda.h"
#include "grammar/token_walk.h"

namespace baton::grammar {

void PositionTable::OrAccepted(uint32_t* mask) const {
  const size_t n = accepted_bits.size();
  for (size_t i = 0; i < n; ++i) mask[i] |= accepted_bits[i];
  for (int32_t id : accepted_ids) mask[id >> 5] |= uint32_t{1} << (id & 31);
}

std::shared_ptr<const PositionTable> BuildPositionTable(const Grammar& grammar,
                                                        const TokenVocab& vocab, int32_t pos) {
  auto table = std::make_shared<PositionTable>();
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
  walk.Run(std::span<const int32_t>(&base, 1), order,
           [&](int32_t index, std::string_view tok, size_t depth) {
             if (walk.Accepted(tok, depth)) {
               accepted.push_back(vocab.sorted[index]);
             } else if (walk.Uncertain(tok, depth)) {
               table->uncertain.push_back(index);
             }
           });
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
