// What one rank's KV page holds: the one layout type of the engine's page pool, of the
// transfer contract between workers (transport/transfer_ticket.h) and of its wire form
// (baton.internal.v1.PageLayout). A rank of a worker group holds the pages of its
// pipeline stage's layers and its tensor-parallel slice's KV heads, under the same page
// ids as every other rank (docs/parallel.md); the layout says which slice it is.
//
// Inside a page: [layer of the stage][kv head of the slice][K, V][position in page][head_dim],
// head-major. A head's K rows of one page are contiguous, and its V rows follow, so a
// range of heads of a layer, K and V, is one run in every page that holds them: a transfer
// between groups of different TP writes whole head ranges instead of one run per position
// (docs/parallel.md, "KV transfers with groups"), a layer-wise push still sends one run per
// layer of a page, and attention reads each page's keys of a head as one stream.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace baton::kvcache {

// Bytes of one element of `dtype` ("f32", "bf16", "f16"); 0 when unknown.
inline int64_t DtypeBytes(const std::string& dtype) {
  if (dtype == "f32") return 4;
  if (dtype == "bf16" || dtype == "f16") return 2;
  return 0;
}

struct PageLayout {
  int64_t num_layers = 0;    // layers in these pages: the stage's
  int64_t num_kv_heads = 0;  // KV heads in these pages: the slice's
  int64_t head_dim = 0;
  int64_t block_size = 16;  // tokens per page
  std::string dtype = "f32";
  // Where the slice sits in the model: its first layer and first KV head, and the ranks.
  // One rank: all zero and sizes 1. KV heads replicated over TP ranks (tp above the
  // model's KV heads) give several ranks the same first_kv_head.
  int64_t first_layer = 0;
  int64_t first_kv_head = 0;
  int32_t tp_rank = 0;
  int32_t tp_size = 1;
  int32_t pp_rank = 0;
  int32_t pp_size = 1;

  // Elements of one head's K (or V) rows in one page: from its K to its V.
  int64_t rows_elements() const { return block_size * head_dim; }
  // Elements of one KV head's K and V in one page: from one head to the next.
  int64_t head_stride() const { return 2 * rows_elements(); }
  // Elements of one layer's K and V in one page.
  int64_t layer_elements() const { return num_kv_heads * head_stride(); }
  // Elements from the page's start to (stage layer, slice head, K = 0 or V = 1, position).
  int64_t element_offset(int64_t stage_layer, int64_t slice_head, int64_t half, int64_t pos) const {
    return stage_layer * layer_elements() + slice_head * head_stride() + half * rows_elements() +
           pos * head_dim;
  }
  int64_t elements_per_block() const { return num_layers * layer_elements(); }
  int64_t page_bytes() const { return elements_per_block() * DtypeBytes(dtype); }
  // page_bytes(), or nullopt when a dimension is below 1, the dtype is unknown or the
  // product overflows: the form to use on a layout that came from a peer.
  std::optional<int64_t> checked_page_bytes() const {
    int64_t out = 2 * DtypeBytes(dtype);
    if (out == 0) return std::nullopt;
    for (int64_t d : {num_layers, block_size, num_kv_heads, head_dim}) {
      if (d < 1 || __builtin_mul_overflow(out, d, &out)) return std::nullopt;
    }
    return out;
  }

  bool operator==(const PageLayout&) const = default;
};

}  // namespace baton::kvcache
