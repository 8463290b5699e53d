// Paged KV on the GPU: the KV write and attention for decode, over the page layout of
// kvcache/page_layout.h ([layer][kv head][K, V][position][head_dim] in each page), so
// that one ticket and one layout serve CPU and GPU workers alike. Framework-free: raw
// device pointers, shapes and a stream; the caller checks the cudaError_t.
//
// Decode attention is flash-decoding: each sequence's context is cut into splits of
// kDecodeSplit positions, fixed, so a sequence's result never depends on the batch or on
// the other sequences' lengths (docs/engine.md, batch invariance). One block takes one
// (sequence, KV head, split) and every query head of that KV head's group, so a K or V
// row is read from memory once for the whole group; a second kernel merges the splits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace baton::kernels::cuda {

inline constexpr int kDecodeSplit = 256;  // positions per split
inline constexpr int kMaxGroup = 16;      // query heads per KV head
inline constexpr int kMaxHeadDim = 256;   // a multiple of 8 up to this

enum class KvType { kF32, kBf16 };

// One layer's pages: element (page, kv head, half, pos, d) sits at
// page * page_stride + head * head_stride + half * rows + pos * head_dim + d from `base`
// (half 0 is K, 1 is V). Strides are in elements of `type`.
struct PagedKv {
  void* base = nullptr;
  KvType type = KvType::kF32;
  int64_t page_stride = 0;  // kvcache::PageLayout::elements_per_block()
  int64_t head_stride = 0;  // head_stride()
  int64_t rows = 0;         // rows_elements(): block_size * head_dim
  int block_size = 0;
  int head_dim = 0;
};

// Writes `tokens` tokens' K and V, num_kv_heads x head_dim f32 each at k + t * row_stride
// and v + t * row_stride (row_stride floats between tokens: the K and V parts of fused
// qkv rows, or kv_heads * head_dim for packed ones), at position slot_rows[t] of page
// slot_pages[t], converted to the pages' type. A slot with a negative page or row is
// padding and writes nothing.
cudaError_t WritePagedKv(const PagedKv& kv, int num_kv_heads, const float* k, const float* v,
                         int64_t row_stride, const int32_t* slot_pages, const int32_t* slot_rows,
                         int tokens, cudaStream_t stream);

// Bytes of workspace DecodeAttention needs for these shapes: per (sequence, query head,
// split of kDecodeSplit positions up to max_context), head_dim + 2 floats (the split's
// unnormalized output, its max score and its sum of exponentials).
int64_t DecodeAttentionWorkspaceBytes(int num_seqs, int num_q_heads, int head_dim, int max_context);

// Sequence s has one query token, row q_rows[s] of q (rows q_stride floats apart, the
// num_q_heads heads of head_dim first in a row), and attends over positions
// 0..context_lens[s]-1 of its pages, block_tables[s * max_blocks ...]: out row q_rows[s]
// (rows num_q_heads * head_dim floats apart) gets softmax(q . K^T * scale) . V per head.
// Query head qh reads KV head qh / (num_q_heads / num_kv_heads). A context of 0 (a padding
// sequence) writes zeros. Contexts must be at most max_context, which sets the splits
// launched and the workspace; a longer one is cut there rather than read past the
// workspace. cudaErrorInvalidValue for shapes it does not take (head_dim not a multiple of
// 8 up to kMaxHeadDim, a group over kMaxGroup, num_q_heads not a multiple of
// num_kv_heads, block tables shorter than max_context).
cudaError_t DecodeAttention(const float* q, int64_t q_stride, const int32_t* q_rows,
                            const PagedKv& kv, const int32_t* block_tables, int max_blocks,
                            const int32_t* context_lens, int num_seqs, int num_q_heads,
                            int num_kv_heads, int max_context, float scale, void* workspace,
                            float* out, cudaStream_t stream);

// Causal attention for a ragged batch of prompt chunks (prefill), flash-style: sequence s
// brings query_lens[s] new tokens, rows query_starts[s].. of q (q_stride floats apart, the
// query heads first in a row) and of out (num_q_heads * head_dim floats apart), at
// positions context_lens[s] - query_lens[s] onward; its first context_lens[s] positions
// are in its pages (a cached prefix, then the chunk, whose K/V WritePagedKv wrote first).
// A sequence with no new tokens writes nothing. Each block takes kPrefillQueries queries of
// one head and walks key tiles of kPrefillKeys positions with an online softmax, so a
// query's result depends only on its own sequence. Every query_lens[s] must be at most
// max_query_len and at most context_lens[s], and every context at most max_blocks *
// block_size. cudaErrorInvalidValue as for DecodeAttention.
inline constexpr int kPrefillQueries = 16;
inline constexpr int kPrefillKeys = 32;
cudaError_t PrefillAttention(const float* q, int64_t q_stride, const PagedKv& kv,
                             const int32_t* block_tables, int max_blocks,
                             const int32_t* query_starts, const int32_t* query_lens,
                             const int32_t* context_lens, int num_seqs, int max_query_len,
                             int num_q_heads, int num_kv_heads, float scale, float* out,
                             cudaStream_t stream);

}  // namespace baton::kernels::cuda
