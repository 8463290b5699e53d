// The paged KV pool: one allocation, cut into pages of `block_size` positions. A page
// holds every layer's K and V for its positions, so one page is one unit to share, to
// evict or to ship to another worker.
//
// Page layout (kvcache/page_layout.h): [layer][kv head][K, V][position in page][head_dim],
// in the layout's dtype: "bf16" (the default, what GPU workers hold too) or "f32".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvcache/page_layout.h"

namespace baton::kvcache {

// The KV element types the CPU engine holds (EngineOptions::kv_cache_dtype, the flag
// --kv-cache-dtype): "bf16", the default, and "f32", for comparisons with f32 oracles.
// InvalidArgument naming the flag and both values for anything else.
absl::Status CheckKvCacheDtype(std::string_view dtype);

class KvPool {
 public:
  // InvalidArgument if the layout is degenerate, its dtype is not one CheckKvCacheDtype
  // takes, or num_blocks < 1; ResourceExhausted if
  // the memory cannot be had. `memory` (64-byte aligned, num_blocks pages, and
  // outliving the pool) is used instead of a mapping of the pool's own when given.
  static absl::StatusOr<std::unique_ptr<KvPool>> Create(const PageLayout& layout,
                                                        int64_t num_blocks, void* memory = nullptr);

  const PageLayout& layout() const { return layout_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t num_free_blocks() const { return static_cast<int64_t>(free_.size()); }

  // Takes a free page; ResourceExhausted naming the pool size when none is left.
  absl::StatusOr<int32_t> Allocate();
  void Free(int32_t block);  // precondition: allocated

  // Page `block`'s first byte; pages are layout().page_bytes() apart.
  std::byte* block_data(int32_t block) { return data_.get() + block * layout_.page_bytes(); }

 private:
  KvPool(const PageLayout& layout, int64_t num_blocks);

  struct Unmapper {
    size_t bytes;  // 0: the memory is not the pool's to unmap
    void operator()(std::byte* p) const;
  };
  PageLayout layout_;
  int64_t num_blocks_;
  // Anonymous memory (or the caller's): zero pages until first written, so a large budget
  // costs only what is used.
  std::unique_ptr<std::byte, Unmapper> data_;
  std::vector<int32_t> free_;  // a stack: the most recently freed page is reused first
  std::vector<bool> allocated_;
};

}  // namespace baton::kvcache
