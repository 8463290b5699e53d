#include "model/forward_batch.h"

#include "common/strings.h"

namespace baton::model {

int64_t PlanLogitRows(std::span<const SequenceInput> batch, std::vector<int64_t>* first_row) {
  first_row->assign(batch.size(), -1);
  int64_t rows = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const int64_t count = static_cast<int64_t>(batch[s].tokens.size());
    int64_t want = 0;
    if (batch[s].logits == LogitsWanted::kAll) want = count;
    if (batch[s].logits == LogitsWanted::kLast) want = count > 0 ? 1 : 0;
    if (want > 0) (*first_row)[s] = rows;
    rows += want;
  }
  return rows;
}

absl::Status ValidateBatch(const ModelConfig& config, std::span<const SequenceInput> batch,
                           int64_t num_pages, int64_t block_size) {
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& seq = batch[s];
    if (seq.tokens.empty()) {
      return absl::InvalidArgumentError(StrCat("sequence ", s, " of the batch has no tokens"));
    }
    const int64_t end = seq.start_pos + static_cast<int64_t>(seq.tokens.size());
    if (seq.start_pos < 0 || end > config.max_position_embeddings) {
      return absl::InvalidArgumentError(StrCat("sequence ", s, " reaches position ", end,
                                               "; the model's context is ",
                                               config.max_position_embeddings, " tokens"));
    }
    const int64_t blocks_needed = (end + block_size - 1) / block_size;
    if (static_cast<int64_t>(seq.block_table.size()) < blocks_needed) {
      return absl::InvalidArgumentError(StrCat("sequence ", s, " needs ", blocks_needed,
                                               " KV blocks, its block table has ",
                                               seq.block_table.size()));
    }
    for (int64_t b = 0; b < blocks_needed; ++b) {
      if (seq.block_table[b] < 0 || seq.block_table[b] >= num_pages) {
        return absl::InvalidArgumentError(StrCat("sequence ", s, " names KV block ",
                                                 seq.block_table[b], "; the pool has ", num_pages));
      }
    }
    for (int32_t token : seq.tokens) {
      if (token < 0 || token >= config.vocab_size) {
        return absl::InvalidArgumentError(
            StrCat("token id ", token, " is outside the vocabulary [0, ", config.vocab_size, ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace baton::model
