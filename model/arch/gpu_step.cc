#include "model/arch/gpu_step.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace baton::model {
namespace {

int64_t Align4(int64_t n) { return (n + 3) / 4 * 4; }  // 16 bytes of int32

bool IsDecode(const SequenceInput& seq) { return seq.tokens.size() == 1; }

int64_t BlocksFor(int64_t positions, int64_t block_size) {
  return (positions + block_size - 1) / block_size;
}

}  // namespace

GpuStepPlan::Offsets GpuStepOffsets(const GpuStepShape& s) {
  GpuStepPlan::Offsets at;
  int64_t next = 0;
  auto take = [&](int64_t n) {
    const int64_t here = next;
    next += Align4(n);
    return here;
  };
  at.token_ids = take(s.tokens);
  at.positions = take(s.tokens);
  at.slot_pages = take(s.tokens);
  at.slot_rows = take(s.tokens);
  at.decode_rows = take(s.decode_seqs);
  at.decode_context = take(s.decode_seqs);
  at.decode_tables = take(int64_t{s.decode_seqs} * s.decode_blocks);
  at.prefill_starts = take(s.prefill_seqs);
  at.prefill_lens = take(s.prefill_seqs);
  at.prefill_context = take(s.prefill_seqs);
  at.prefill_tables = take(int64_t{s.prefill_seqs} * s.prefill_blocks);
  at.logit_rows = take(s.logit_rows);
  at.total = next;
  return at;
}

GpuStepShape GpuStepShapeOf(std::span<const SequenceInput> batch, int64_t block_size) {
  GpuStepShape s;
  for (const SequenceInput& seq : batch) {
    const int64_t n = static_cast<int64_t>(seq.tokens.size());
    const int64_t end = seq.start_pos + n;
    s.tokens += static_cast<int>(n);
    const int blocks = static_cast<int>(BlocksFor(end, block_size));
    if (IsDecode(seq)) {
      ++s.decode_seqs;
      s.decode_blocks = std::max(s.decode_blocks, blocks);
      s.max_context = std::max(s.max_context, static_cast<int>(end));
    } else {
      ++s.prefill_seqs;
      s.prefill_blocks = std::max(s.prefill_blocks, blocks);
      s.max_query_len = std::max(s.max_query_len, static_cast<int>(n));
    }
    if (seq.logits == LogitsWanted::kAll) s.logit_rows += static_cast<int>(n);
    if (seq.logits == LogitsWanted::kLast) s.logit_rows += 1;
  }
  return s;
}

absl::Status BuildGpuStepPlan(std::span<const SequenceInput> batch, int64_t block_size,
                              const GpuStepShape& shape, GpuStepPlan* plan) {
  const GpuStepShape need = GpuStepShapeOf(batch, block_size);
  if (need.tokens > shape.tokens || need.decode_seqs > shape.decode_seqs ||
      need.prefill_seqs > shape.prefill_seqs || need.decode_blocks > shape.decode_blocks ||
      need.prefill_blocks > shape.prefill_blocks || need.logit_rows > shape.logit_rows ||
      need.max_context > shape.max_context || need.max_query_len > shape.max_query_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("the step (", need.tokens, " tokens, ", need.decode_seqs, " decode and ",
                     need.prefill_seqs, " prefill sequences) does not fit the launch shape of ",
                     shape.tokens, " tokens, ", shape.decode_seqs, " and ", shape.prefill_seqs));
  }
  plan->shape = shape;
  plan->at = GpuStepOffsets(shape);
  const GpuStepPlan::Offsets& at = plan->at;
  std::vector<int32_t>& p = plan->packed;
  p.assign(at.total, 0);
  // Padding rows: no KV slot, and (below) decode padding has context 0.
  std::fill_n(p.begin() + at.slot_pages, shape.tokens, -1);
  std::fill_n(p.begin() + at.slot_rows, shape.tokens, -1);

  int32_t row = 0, decode = 0, prefill = 0, logit = 0;
  for (const SequenceInput& seq : batch) {
    const int32_t n = static_cast<int32_t>(seq.tokens.size());
    const int64_t end = seq.start_pos + n;
    for (int32_t i = 0; i < n; ++i) {
      const int64_t pos = seq.start_pos + i;
      p[at.token_ids + row + i] = seq.tokens[i];
      p[at.positions + row + i] = static_cast<int32_t>(pos);
      p[at.slot_pages + row + i] = seq.block_table[pos / block_size];
      p[at.slot_rows + row + i] = static_cast<int32_t>(pos % block_size);
    }
    const int64_t blocks = BlocksFor(end, block_size);
    if (IsDecode(seq)) {
      p[at.decode_rows + decode] = row;
      p[at.decode_context + decode] = static_cast<int32_t>(end);
      std::copy_n(seq.block_table.begin(), blocks,
                  p.begin() + at.decode_tables + int64_t{decode} * shape.decode_blocks);
      ++decode;
    } else {
      p[at.prefill_starts + prefill] = row;
      p[at.prefill_lens + prefill] = n;
      p[at.prefill_context + prefill] = static_cast<int32_t>(end);
      std::copy_n(seq.block_table.begin(), blocks,
                  p.begin() + at.prefill_tables + int64_t{prefill} * shape.prefill_blocks);
      ++prefill;
    }
    if (seq.logits == LogitsWanted::kAll) {
      for (int32_t i = 0; i < n; ++i) p[at.logit_rows + logit++] = row + i;
    } else if (seq.logits == LogitsWanted::kLast) {
      p[at.logit_rows + logit++] = row + n - 1;
    }
    row += n;
  }
  plan->real_tokens = row;
  plan->real_logit_rows = logit;
  // Padding decode sequences and logits rows point at padding token rows (their own
  // results, ignored), never at a real row they could disturb.
  for (int32_t d = decode, r = row; d < shape.decode_seqs; ++d) {
    p[at.decode_rows + d] = std::min(r++, shape.tokens - 1);
  }
  for (int32_t l = logit; l < shape.logit_rows; ++l) {
    p[at.logit_rows + l] = std::min(l, shape.tokens - 1);
  }
  return absl::OkStatus();
}

int GraphBatchBucket(int num_seqs) {
  if (num_seqs <= 1) return 1;
  if (num_seqs <= 2) return 2;
  if (num_seqs <= 4) return 4;
  return (num_seqs + 7) / 8 * 8;
}

int GraphContextBucket(int context) {
  int bucket = kGraphMinContext;
  while (bucket < context) bucket *= 2;
  return bucket;
}

GpuStepShape GraphBucketFor(std::span<const SequenceInput> batch, int64_t block_size,
                            int64_t max_context, int max_graph_batch) {
  const GpuStepShape need = GpuStepShapeOf(batch, block_size);
  if (need.prefill_seqs > 0 || need.decode_seqs == 0 || need.decode_seqs > max_graph_batch ||
      need.max_context > max_context) {
    return {};
  }
  // Only when every sequence wants its one logits row: the graph gathers all of them.
  for (const SequenceInput& seq : batch) {
    if (seq.logits != LogitsWanted::kLast) return {};
  }
  GpuStepShape s;
  const int b = GraphBatchBucket(need.decode_seqs);
  if (b > max_graph_batch) return {};
  const int c = GraphContextBucket(need.max_context);
  s.tokens = s.decode_seqs = s.logit_rows = b;
  s.max_context = c;
  s.decode_blocks = static_cast<int>(BlocksFor(c, block_size));
  return s;
}

}  // namespace baton::model
