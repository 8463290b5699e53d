#include "transport/kv_checksum.h"

#include "common/check.h"
#include "engine/kv_ranges.h"
#include "xxhash.h"

namespace baton::transport {

KvChecksum PromptKvChecksum(const void* pool, const kvcache::PageLayout& layout,
                            std::span<const int32_t> pages, int64_t first_block,
                            int64_t prompt_len) {
  XXH3_state_t* state = XXH3_createState();
  BATON_CHECK(state != nullptr);
  XXH3_64bits_reset(state);
  KvChecksum out;
  const auto* base = static_cast<const std::byte*>(pool);
  const int64_t page_bytes = layout.page_bytes();
  for (size_t i = 0; i < pages.size(); ++i) {
    const int64_t block = first_block + static_cast<int64_t>(i);
    engine::ForEachBlockRange(layout, block, prompt_len, [&](const engine::KvRange& r) {
      XXH3_64bits_update(state, base + pages[i] * page_bytes + r.offset,
                         static_cast<size_t>(r.bytes));
      out.bytes += static_cast<uint64_t>(r.bytes);
    });
  }
  out.hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return out;
}

}  // namespace baton::transport
