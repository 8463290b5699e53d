// Causal attention of one query head over K/V stored in fixed-size pages.
//
// A page (block) holds `block_size` consecutive positions; a block table lists the pages
// of one sequence in position order. Within a page, position t of KV head h sits at
// h * head_stride + t * head_dim elements from the page's K (or V) start: a head's rows are
// contiguous (kvcache/page_layout.h). Pages hold f32 or bf16 (bf16.h); bf16 is widened to
// f32 exactly as it is read, and all arithmetic is f32. The result for a query depends
// only on it and its sequence's keys/values, and every sum runs in key order, so a token
// computed in a prefill chunk equals the same token decoded alone.
#pragma once

#include <cstdint>

namespace baton::cpu {

// The element type of the pages: f32, or bf16 (what GPU workers hold).
enum class KvDtype : uint8_t { kF32, kBf16 };

struct PagedKvView {
  const void* k = nullptr;  // this layer's K in block 0, `dtype` elements
  const void* v = nullptr;  // this layer's V in block 0
  KvDtype dtype = KvDtype::kF32;
  int64_t block_stride = 0;  // elements from one block's K (or V) to the next block's
  int64_t block_size = 0;    // positions per block
  int64_t head_stride = 0;   // elements from one KV head's rows to the next's in a block
  int64_t head_dim = 0;
};

// out[head_dim] = softmax(q . K[0..pos]^T * scale) . V[0..pos] for KV head `kv_head`.
// `scores` is scratch of at least pos + 1 floats.
void AttendOneQuery(const float* q, int64_t pos, int64_t kv_head, const int32_t* block_table,
                    const PagedKvView& kv, float scale, float* scores, float* out);

// AttendOneQuery for `count` query heads that share KV head `kv_head` (a GQA group, or part
// of one), all at position `pos`: q and out hold them back to back, head_dim floats each,
// and `scores` is scratch of at least count * (pos + 1) floats. Each query's result is
// bit-identical to AttendOneQuery's; the group only saves loads of K and V.
void AttendQueries(const float* q, int64_t count, int64_t pos, int64_t kv_head,
                   const int32_t* block_table, const PagedKvView& kv, float scale, float* scores,
                   float* out);

}  // namespace baton::cpu
