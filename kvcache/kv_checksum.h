// The checksum a KV transfer's completion carries: XXH3-64 over the prompt's K/V in the
// blocks the sender wrote, in a fixed order: block by block; a full block whole, the
// partial last block layer by layer, K then V, its filled positions only (unfilled
// positions are never sent, so they differ between the two sides). The sender computes
// it over its own pages, the receiver over the pages it reserved; they must agree.
#pragma once

#include <cstdint>
#include <span>

#include "kvcache/kv_pool.h"

namespace baton::kvcache {

struct KvChecksum {
  uint64_t hash = 0;
  uint64_t bytes = 0;  // prompt K/V bytes hashed
};

// `pool`: page 0 of the pool; `pages[i]` holds block first_block + i of a prompt of
// `prompt_len` tokens. Precondition: the pages lie in the pool and cover the prompt.
KvChecksum PromptKvChecksum(const void* pool, const kvcache::PageLayout& layout,
                            std::span<const int32_t> pages, int64_t first_block,
                            int64_t prompt_len);

// The checksum of what one rank of a sender writes into one rank of a receiver when the
// two hold different slices (kvcache/slice_copy.h): over the prompt's blocks from
// `first_block`, block by block, the runs of SliceCopyRuns(src, dst) over the block's
// filled positions, in their order. The sender hashes the runs' source bytes in its pages
// (`side` kSource, `layout`-wise `src`), the receiver their destination bytes in its own
// (kDestination, `dst`); they agree when every byte arrived in its place.
enum class SliceSide { kSource, kDestination };
KvChecksum SliceKvChecksum(const void* pool, const kvcache::PageLayout& src,
                           const kvcache::PageLayout& dst, SliceSide side,
                           std::span<const int32_t> pages, int64_t first_block, int64_t prompt_len);

}  // namespace baton::kvcache
