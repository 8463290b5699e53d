// What the GPU forward sends to the device for one step: the batch's tokens, positions,
// KV slots, block tables and logits rows as one packed array of int32 (one host-to-device
// copy), and the shapes its kernels are launched with. Host logic only, so that CI tests
// it where there is no GPU.
//
// Sequences with one new token go through decode attention, longer chunks through
// prefill attention; the choice depends on the sequence alone, so a sequence's result
// never depends on what else is in the batch (docs/engine.md, batch invariance).
//
// A CUDA graph replays fixed pointers and shapes: a decode-only step is padded to a
// bucket (GraphBucketFor) whose shape fixes every offset of the packed array. Padding
// tokens write no KV (slot -1), attend over nothing (context 0) and read row 0 of the
// embedding; their rows are computed and ignored.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "model/forward_batch.h"

namespace baton::model {

// The capacities the packed layout depends on.
struct GpuStepShape {
  int tokens = 0;          // token rows
  int decode_seqs = 0;     // sequences through decode attention
  int prefill_seqs = 0;    // sequences through prefill attention
  int decode_blocks = 0;   // block-table width of a decode sequence
  int prefill_blocks = 0;  // block-table width of a prefill sequence
  int logit_rows = 0;
  int max_context = 0;    // decode: the longest context the kernels are launched for
  int max_query_len = 0;  // prefill: the longest chunk

  bool operator==(const GpuStepShape&) const = default;
};

struct GpuStepPlan {
  GpuStepShape shape;
  // Offsets (in int32 elements, 16-byte aligned) of each list in `packed`.
  struct Offsets {
    int64_t token_ids = 0, positions = 0, slot_pages = 0, slot_rows = 0;
    int64_t decode_rows = 0, decode_context = 0, decode_tables = 0;
    int64_t prefill_starts = 0, prefill_lens = 0, prefill_context = 0, prefill_tables = 0;
    int64_t logit_rows = 0;
    int64_t total = 0;
    bool operator==(const Offsets&) const = default;
  } at;
  std::vector<int32_t> packed;
  int real_tokens = 0;  // tokens of the batch; the rest of shape.tokens is padding
  int real_logit_rows = 0;
};

// Offsets of the lists for a shape.
GpuStepPlan::Offsets GpuStepOffsets(const GpuStepShape& shape);

// The exact shape of a batch (no padding).
GpuStepShape GpuStepShapeOf(std::span<const SequenceInput> batch, int64_t block_size);

// Packs `batch` (already validated: model/forward_batch.h ValidateBatch) into `plan` for
// `shape`, which must hold it (GpuStepShapeOf's, or a graph bucket's): InvalidArgument
// otherwise. Every list is filled to its capacity, padding included.
absl::Status BuildGpuStepPlan(std::span<const SequenceInput> batch, int64_t block_size,
                              const GpuStepShape& shape, GpuStepPlan* plan);

// Decode-only batches of up to kMaxGraphBatch sequences replay a graph captured for a
// bucket: the batch size rounded up to 1, 2, 4, 8, then a multiple of 8 (vLLM's
// buckets), and the longest context rounded up to a power of two of at least
// kDecodeSplit positions. Nullopt-like: shape.tokens == 0 when the batch does not qualify
// (a prefill chunk in it, too many sequences, a context past max_context).
inline constexpr int kMaxGraphBatch = 256;
inline constexpr int kGraphMinContext = 256;
int GraphBatchBucket(int num_seqs);
int GraphContextBucket(int context);
GpuStepShape GraphBucketFor(std::span<const SequenceInput> batch, int64_t block_size,
                            int64_t max_context, int max_graph_batch = kMaxGraphBatch);

}  // namespace baton::model
