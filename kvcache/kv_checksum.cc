#include "kvcache/kv_checksum.h"

#include <algorithm>
#include <vector>

#include "common/check.h"
#include "kvcache/kv_ranges.h"
#include "kvcache/slice_copy.h"
#include "xxhash.h"

namespace baton::kvcache {
namespace {

// XXH3-64 over byte runs fed in order, and their count.
class RunHasher {
 public:
  RunHasher() : state_(XXH3_createState()) {
    BATON_CHECK(state_ != nullptr);
    XXH3_64bits_reset(state_);
  }
  ~RunHasher() { XXH3_freeState(state_); }
  RunHasher(const RunHasher&) = delete;
  RunHasher& operator=(const RunHasher&) = delete;

  void Add(const std::byte* data, int64_t bytes) {
    XXH3_64bits_update(state_, data, static_cast<size_t>(bytes));
    out_.bytes += static_cast<uint64_t>(bytes);
  }
  KvChecksum Done() {
    out_.hash = XXH3_64bits_digest(state_);
    return out_;
  }

 private:
  XXH3_state_t* state_;
  KvChecksum out_;
};

}  // namespace

KvChecksum PromptKvChecksum(const void* pool, const kvcache::PageLayout& layout,
                            std::span<const int32_t> pages, int64_t first_block,
                            int64_t prompt_len) {
  RunHasher hash;
  const auto* base = static_cast<const std::byte*>(pool);
  const int64_t page_bytes = layout.page_bytes();
  for (size_t i = 0; i < pages.size(); ++i) {
    const int64_t block = first_block + static_cast<int64_t>(i);
    kvcache::ForEachBlockRange(layout, block, prompt_len, [&](const kvcache::KvRange& r) {
      hash.Add(base + pages[i] * page_bytes + r.offset, r.bytes);
    });
  }
  return hash.Done();
}

KvChecksum SliceKvChecksum(const void* pool, const kvcache::PageLayout& src,
                           const kvcache::PageLayout& dst, SliceSide side,
                           std::span<const int32_t> pages, int64_t first_block,
                           int64_t prompt_len) {
  RunHasher hash;
  const auto* base = static_cast<const std::byte*>(pool);
  const bool from_src = side == SliceSide::kSource;
  const int64_t page_bytes = (from_src ? src : dst).page_bytes();
  const std::vector<kvcache::CopyRun> full = kvcache::SliceCopyRuns(src, dst);
  for (size_t i = 0; i < pages.size(); ++i) {
    const int64_t block = first_block + static_cast<int64_t>(i);
    const int64_t filled = std::min(prompt_len - block * src.block_size, src.block_size);
    if (filled <= 0) break;
    const std::vector<kvcache::CopyRun> partial =
        filled == src.block_size ? std::vector<kvcache::CopyRun>()
                                 : kvcache::SliceCopyRuns(src, dst, 0, INT64_MAX, 0, filled);
    for (const kvcache::CopyRun& r : filled == src.block_size ? full : partial) {
      hash.Add(base + pages[i] * page_bytes + (from_src ? r.src_offset : r.dst_offset), r.bytes);
    }
  }
  return hash.Done();
}

}  // namespace baton::kvcache
