// What one forward step computes: a ragged batch of sequences, each with some new tokens
// (a prefill chunk, or one decode token) and the block table of its KV pages.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "model/model_config.h"

namespace baton::model {

enum class LogitsWanted { kNone, kLast, kAll };

struct SequenceInput {
  std::span<const int32_t> tokens;       // the new tokens, at positions start_pos...
  int64_t start_pos = 0;                 // tokens already in this sequence's KV pages
  std::span<const int32_t> block_table;  // pages covering [0, start_pos + tokens.size())
  LogitsWanted logits = LogitsWanted::kLast;
  // In a worker group, the id under which every rank knows the KV push this sequence's
  // prompt feeds (engine/kv_sink.h, group_push); 0: none.
  uint64_t kv_push = 0;
  // The caller takes only the greedy choice of this sequence's last row (kLast): a backend
  // may return that id (ForwardOutput::greedy_ids) instead of the row, so that a GPU's
  // logits need not cross to the host. A backend that does not leaves the row.
  bool greedy = false;
};

struct ForwardOutput {
  // Rows of vocab_size floats, for the sequences in batch order: one row for kLast,
  // tokens.size() rows for kAll, none for kNone.
  std::vector<float> logits;
  std::vector<int64_t> first_row;  // per sequence: its first logits row, or -1
  int64_t vocab_size = 0;
  // Per sequence, when not empty: the greedy id a backend chose for a `greedy` sequence
  // (the first id of its row's maximum; ties to the lowest id, NaN never), whose row it
  // then leaves out (first_row -1); -1 for the others.
  std::vector<int32_t> greedy_ids;

  std::span<const float> row(int64_t r) const {
    return {logits.data() + r * vocab_size, static_cast<size_t>(vocab_size)};
  }
};

// Logits rows the batch asks for, and each sequence's first row (or -1): the layout of
// ForwardOutput.
int64_t PlanLogitRows(std::span<const SequenceInput> batch, std::vector<int64_t>* first_row);

// InvalidArgument for a sequence without tokens, a token id outside the vocabulary, a
// position past the model's context, a block table too short or naming a page outside
// [0, num_pages): what every backend refuses before it runs a step.
absl::Status ValidateBatch(const ModelConfig& config, std::span<const SequenceInput> batch,
                           int64_t num_pages, int64_t block_size);

}  // namespace baton::model
