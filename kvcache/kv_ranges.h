// The byte ranges of a page that hold one layer's K/V for some positions: what a KV sink
// copies after each layer (engine/kv_sink.h), and what a receiver checks. A page is
// [layer][kv head][K, V][position in page][head_dim] (kvcache/page_layout.h), so when the
// positions cover the whole page, K and V of the layer are one range; otherwise each
// head's K for consecutive positions is one range, and its V another.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "kvcache/kv_pool.h"

namespace baton::kvcache {

struct KvRange {
  int64_t block = 0;   // index in the sequence's block table
  int64_t offset = 0;  // bytes from the page's start
  int64_t bytes = 0;
};

// Calls fn(KvRange) for layer `layer`'s K/V of positions [start, start + count), skipping
// blocks before `first_block`, in block order, K before V.
template <typename Fn>
void ForEachLayerRange(const PageLayout& layout, int64_t layer, int64_t start, int64_t count,
                       int64_t first_block, Fn&& fn) {
  const int64_t bs = layout.block_size;
  const int64_t elem = kvcache::DtypeBytes(layout.dtype);
  const int64_t row = layout.head_dim * elem;
  const int64_t end = start + count;
  for (int64_t block = std::max(start / bs, first_block); block * bs < end; ++block) {
    const int64_t p0 = std::max(start, block * bs) - block * bs;
    const int64_t p1 = std::min(end, (block + 1) * bs) - block * bs;
    if (p0 == 0 && p1 == bs) {
      fn(KvRange{block, layout.element_offset(layer, 0, 0, 0) * elem,
                 layout.layer_elements() * elem});
      continue;
    }
    for (int64_t h = 0; h < layout.num_kv_heads; ++h) {
      for (int64_t half = 0; half < 2; ++half) {
        fn(KvRange{block, layout.element_offset(layer, h, half, p0) * elem, (p1 - p0) * row});
      }
    }
  }
}

// Calls fn(KvRange) for every layer's K/V of the positions of block `block` below
// `prompt_len`: the whole of a full block in one range, else per layer K then V.
template <typename Fn>
void ForEachBlockRange(const PageLayout& layout, int64_t block, int64_t prompt_len, Fn&& fn) {
  const int64_t bs = layout.block_size;
  const int64_t filled = std::min(prompt_len - block * bs, bs);
  if (filled <= 0) return;
  if (filled == bs) {
    fn(KvRange{block, 0, layout.page_bytes()});
    return;
  }
  for (int64_t layer = 0; layer < layout.num_layers; ++layer) {
    ForEachLayerRange(layout, layer, block * bs, filled, block, fn);
  }
}

// What a layer-wise push of one prompt sends, forward by forward: the K/V each layer
// computed, and, before the first forward's first layer, the blocks the sender's own
// prefix cache served (they are never computed, but the receiver lacks them). Blocks
// before `first_block` (the receiver has them) and positions past the prompt are skipped.
class KvPushCursor {
 public:
  KvPushCursor(const PageLayout& layout, int64_t first_block, int64_t prompt_len)
      : layout_(layout), first_block_(first_block), prompt_len_(prompt_len) {}

  template <typename Fn>
  void OnLayerWritten(int64_t layer, int64_t start, int64_t count, Fn&& fn) {
    if (!started_) {
      started_ = true;
      // Positions before the first forward's start came from the sender's cache: whole
      // blocks.
      for (int64_t b = first_block_; (b + 1) * layout_.block_size <= start; ++b) {
        ForEachBlockRange(layout_, b, prompt_len_, fn);
      }
    }
    const int64_t n = std::min(count, prompt_len_ - start);
    if (n > 0) ForEachLayerRange(layout_, layer, start, n, first_block_, fn);
  }

 private:
  PageLayout layout_;
  int64_t first_block_;
  int64_t prompt_len_;
  bool started_ = false;
};

}  // namespace baton::kvcache
